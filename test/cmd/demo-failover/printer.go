package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// printer writes the demo's story. The Lease watcher prints from its own goroutine, so
// whole lines are written under a lock, each stamped with the time since the start.
type printer struct {
	mu    sync.Mutex
	out   io.Writer
	start time.Time
}

func newPrinter(out io.Writer) *printer { return &printer{out: out, start: time.Now()} }

// step starts a section.
func (p *printer) step(format string, args ...any) {
	p.write("\n==> "+format, args...)
}

// info prints a line of a section.
func (p *printer) info(format string, args ...any) {
	p.write("    "+format, args...)
}

// event prints something that happened at a moment that matters, such as a change of
// the Lease's holder, with its time since the start.
func (p *printer) event(at time.Time, format string, args ...any) {
	p.write(fmt.Sprintf("    [%6.2fs] ", at.Sub(p.start).Seconds())+format, args...)
}

// block prints text indented, e.g. the output of `mini-kcm leader`.
func (p *printer) block(text string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		fmt.Fprintln(p.out, "    | "+line)
	}
}

func (p *printer) write(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.out, format+"\n", args...)
}

// seconds formats a duration as seconds with two decimals, the unit of every timing
// the demo prints.
func seconds(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }
