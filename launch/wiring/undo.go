package wiring

import "errors"

// Undo is a stack of cleanups: a setup step pushes what undoes it, and Run
// undoes every step in reverse order.
type Undo struct{ steps []func() error }

// Push adds a cleanup.
func (u *Undo) Push(f func() error) { u.steps = append(u.steps, f) }

// Run runs the cleanups last first, each once, and joins their errors.
func (u *Undo) Run() error {
	var errs []error
	for i := len(u.steps) - 1; i >= 0; i-- {
		if err := u.steps[i](); err != nil {
			errs = append(errs, err)
		}
	}
	u.steps = nil
	return errors.Join(errs...)
}
