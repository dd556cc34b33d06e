package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// clockTicksPerSecond is USER_HZ, the unit of utime and stime in /proc/<pid>/stat.
// It is 100 on every Linux architecture Go supports, and reading sysconf would need cgo.
const clockTicksPerSecond = 100

// processUsage is what the kernel accounts for one process at one moment.
type processUsage struct {
	// CPU is user plus system time since the process started.
	CPU time.Duration
	// PeakRSS is the high-water mark of the resident set (VmHWM), in bytes.
	PeakRSS int64
	// RSS is the resident set now (VmRSS), in bytes.
	RSS int64
	// AnonRSS is the anonymous part of RSS now (RssAnon), in bytes: the heap, stacks and
	// the runtime's own memory.
	AnonRSS int64
	// FileRSS is the file-backed part of RSS now (RssFile), in bytes: mostly the binary's
	// pages, which processes running the same binary share and the kernel can drop and
	// read again, so it grows with the binary, not with the objects cached.
	FileRSS int64
}

// readProcessUsage reads the CPU time and memory of process pid from /proc.
func readProcessUsage(pid int) (processUsage, error) {
	var u processUsage
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, fmt.Errorf("reading CPU time of pid %d: %w", pid, err)
	}
	if u.CPU, err = parseStatCPU(stat); err != nil {
		return u, fmt.Errorf("pid %d: %w", pid, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, fmt.Errorf("reading memory of pid %d: %w", pid, err)
	}
	if u.PeakRSS, err = statusKilobytes(status, "VmHWM:"); err != nil {
		return u, fmt.Errorf("pid %d: %w", pid, err)
	}
	if u.RSS, err = statusKilobytes(status, "VmRSS:"); err != nil {
		return u, fmt.Errorf("pid %d: %w", pid, err)
	}
	if u.AnonRSS, err = statusKilobytes(status, "RssAnon:"); err != nil {
		return u, fmt.Errorf("pid %d: %w", pid, err)
	}
	if u.FileRSS, err = statusKilobytes(status, "RssFile:"); err != nil {
		return u, fmt.Errorf("pid %d: %w", pid, err)
	}
	return u, nil
}

// memoryPeaks keeps the highest RssAnon and RssFile of the samples it observed. The
// kernel keeps a high-water mark of the whole resident set only (VmHWM), so the split
// of the peak is sampled: each part's peak is at most its true one, and the two need
// not come from the same moment.
type memoryPeaks struct {
	mu         sync.Mutex
	anon, file int64
}

// observe records one sample.
func (p *memoryPeaks) observe(u processUsage) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.anon = max(p.anon, u.AnonRSS)
	p.file = max(p.file, u.FileRSS)
}

// peaks returns the highest RssAnon and RssFile observed, in bytes.
func (p *memoryPeaks) peaks() (anon, file int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.anon, p.file
}

// sampleMemory observes read's usage every interval until ctx ends, then returns.
// Read errors are skipped: the process may be exiting, which the run reports anyway.
func sampleMemory(ctx context.Context, interval time.Duration, read func() (processUsage, error), p *memoryPeaks) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		if u, err := read(); err == nil {
			p.observe(u)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// parseStatCPU returns utime+stime from the contents of /proc/<pid>/stat. The command
// name (field 2) may hold spaces and parentheses, so fields are counted from the last
// ')'; utime and stime are fields 14 and 15.
func parseStatCPU(stat []byte) (time.Duration, error) {
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, fmt.Errorf("malformed /proc stat %q", stat)
	}
	// After ")" come field 3 (state) onwards, so utime is at index 14-3.
	fields := strings.Fields(string(stat[end+1:]))
	const utime, stime = 14 - 3, 15 - 3
	if len(fields) <= stime {
		return 0, fmt.Errorf("malformed /proc stat: %d fields after the command name", len(fields))
	}
	var ticks int64
	for _, i := range []int{utime, stime} {
		n, err := strconv.ParseInt(fields[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("malformed /proc stat field %d: %w", i+3, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicksPerSecond, nil
}

// statusKilobytes returns the value of a "Key:   123 kB" line of /proc/<pid>/status in
// bytes.
func statusKilobytes(status []byte, key string) (int64, error) {
	for line := range strings.SplitSeq(string(status), "\n") {
		if !strings.HasPrefix(line, key) {
			continue
		}
		fields := strings.Fields(strings.TrimPrefix(line, key))
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("malformed /proc status line %q", line)
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("malformed /proc status line %q: %w", line, err)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("no %s line in /proc status", key)
}
