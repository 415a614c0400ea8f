package main

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", ":7000", "TCP address to greet on")
	peers := flag.String("peers", "", "comma-separated host:port peers to reach")
	tun := flag.Bool("tun", false, "try to open /dev/net/tun")
	exit := flag.Int("exit", -1, "exit at once with this code instead of running (>= 0)")
	flag.Parse()

	if *exit >= 0 {
		fmt.Println("exiting early on request")
		os.Exit(*exit)
	}
	host, _ := os.Hostname()
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
			fmt.Println("addr", ipn.IP)
		}
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Println("listen error:", err)
		os.Exit(1)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fmt.Fprintf(c, "hello from %s\n", host)
			c.Close()
		}
	}()
	fmt.Println("koala-emu node ready")

	if *tun {
		f, err := os.OpenFile("/dev/net/tun", os.O_RDWR, 0)
		if err != nil {
			fmt.Println("tun error:", err)
		} else {
			fmt.Println("tun ok")
			f.Close()
		}
	}
	if *peers != "" {
		go reach(strings.Split(*peers, ","))
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}

// reach greets every peer, retrying for up to 60 s each.
func reach(peers []string) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	for _, p := range peers {
		wg.Add(1)
		go func(p string) {
			defer wg.Done()
			deadline := time.Now().Add(60 * time.Second)
			for {
				c, err := net.DialTimeout("tcp", p, time.Second)
				if err == nil {
					line, _ := bufio.NewReader(c).ReadString('\n')
					c.Close()
					mu.Lock()
					fmt.Printf("reached %s: %s", p, line)
					mu.Unlock()
					return
				}
				if time.Now().After(deadline) {
					mu.Lock()
					failed++
					fmt.Printf("unreachable %s: %v\n", p, err)
					mu.Unlock()
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}(p)
	}
	wg.Wait()
	if failed == 0 {
		fmt.Println("reached all peers")
	} else {
		fmt.Printf("reached all but %d peers\n", failed)
	}
}
