package netem

import (
	"fmt"
	"sort"
	"time"
)

// DAS-3 cluster names as used by the das3 preset and the shipped scenarios.
const (
	Vrije       = "vrije"
	Amsterdam   = "amsterdam"
	Delft       = "delft"
	MultimediaN = "multimedian"
	Leiden      = "leiden"
)

func ms(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }

func mbps(f float64) float64 { return f * 1e6 }

// das3Table is SPEC §1: measured MPI ping-pong between compute nodes
// (bandwidth with 1 MB messages, one-way latency), symmetric. Delft-Leiden
// was never measured and is unavailable.
var das3Table = map[[2]string]Link{
	{Vrije, Vrije}:             {Bandwidth: mbps(561), Latency: ms(0.03)},
	{Vrije, Amsterdam}:         {Bandwidth: mbps(185), Latency: ms(0.4)},
	{Vrije, Delft}:             {Bandwidth: mbps(45), Latency: ms(1.15)},
	{Vrije, MultimediaN}:       {Bandwidth: mbps(185), Latency: ms(0.4)},
	{Vrije, Leiden}:            {Bandwidth: mbps(77), Latency: ms(1.0)},
	{Amsterdam, Amsterdam}:     {Bandwidth: mbps(526), Latency: ms(0.03)},
	{Amsterdam, Delft}:         {Bandwidth: mbps(53), Latency: ms(1.1)},
	{Amsterdam, MultimediaN}:   {Bandwidth: mbps(512), Latency: ms(0.03)},
	{Amsterdam, Leiden}:        {Bandwidth: mbps(115), Latency: ms(0.6)},
	{Delft, Delft}:             {Bandwidth: mbps(115), Latency: ms(0.05)},
	{Delft, MultimediaN}:       {Bandwidth: mbps(10), Latency: ms(1.45)},
	{Delft, Leiden}:            {Unavailable: true},
	{MultimediaN, MultimediaN}: {Bandwidth: mbps(560), Latency: ms(0.03)},
	{MultimediaN, Leiden}:      {Bandwidth: mbps(115), Latency: ms(0.6)},
	{Leiden, Leiden}:           {Bandwidth: mbps(530), Latency: ms(0.03)},
}

// Uniform presets: every pair, intra- and inter-cluster, gets the same link.
// Figures are what an MPI ping-pong sees through the stack on DAS-3 (SPEC §1):
// Myri-10G about 560 MB/s and 0.03 ms, GbE about 115 MB/s and 0.05 ms.
var uniform = map[string]Link{
	"myri10g": {Bandwidth: mbps(560), Latency: ms(0.03)},
	"gbe":     {Bandwidth: mbps(115), Latency: ms(0.05)},
}

// PresetNames lists the presets Preset accepts.
func PresetNames() []string {
	names := []string{"das3"}
	for n := range uniform {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Preset builds the link matrix of a preset over the given clusters.
// "das3" is the SPEC §1 table and needs DAS-3 cluster names; "myri10g" and
// "gbe" give every pair the same link.
func Preset(name string, clusters []string) (Matrix, error) {
	m := Matrix{Clusters: append([]string(nil), clusters...), Links: make([][]Link, len(clusters))}
	for i := range m.Links {
		m.Links[i] = make([]Link, len(clusters))
	}
	switch name {
	case "das3":
		for i, a := range clusters {
			for j, b := range clusters {
				l, ok := das3Table[[2]string{a, b}]
				if !ok {
					l, ok = das3Table[[2]string{b, a}]
				}
				if !ok {
					return Matrix{}, fmt.Errorf("preset das3 has no cluster pair %s-%s (known clusters: %s, %s, %s, %s, %s)",
						a, b, Vrije, Amsterdam, Delft, MultimediaN, Leiden)
				}
				m.Links[i][j] = l
			}
		}
	default:
		l, ok := uniform[name]
		if !ok {
			return Matrix{}, fmt.Errorf("unknown link preset %q (known: %v)", name, PresetNames())
		}
		for i := range clusters {
			for j := range clusters {
				m.Links[i][j] = l
			}
		}
	}
	return m, nil
}
