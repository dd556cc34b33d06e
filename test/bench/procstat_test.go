package bench

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"
)

func TestParseStatCPUAddsUserAndSystemTime(t *testing.T) {
	tests := []struct {
		name string
		stat string
		want time.Duration
	}{
		{
			name: "plain command name",
			stat: "4242 (mini-kcm) S 1 4242 4242 0 -1 4194560 5000 0 0 0 250 125 0 0 20 0 12 0 100 0 0",
			want: 3750 * time.Millisecond,
		},
		{
			name: "command name with spaces and parentheses",
			stat: "7 (kube (controller) manager) R 1 7 7 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 5 0 0",
			want: 30 * time.Millisecond,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStatCPU([]byte(tt.stat))
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestParseStatCPURejectsTruncatedStat(t *testing.T) {
	for _, stat := range []string{"", "1 (x) S 1 2 3", "1 (x) S 1 2 3 4 5 6 7 8 9 10 abc 12"} {
		if _, err := parseStatCPU([]byte(stat)); err == nil {
			t.Errorf("parseStatCPU(%q) succeeded, want an error", stat)
		}
	}
}

func TestStatusKilobytesReadsPeakCurrentAnonymousAndFileRSS(t *testing.T) {
	status := []byte("Name:\tmini-kcm\nVmPeak:\t 900000 kB\nVmHWM:\t   51200 kB\nVmRSS:\t   40960 kB\nRssAnon:\t   10240 kB\nRssFile:\t   30720 kB\n")
	for key, want := range map[string]int64{"VmHWM:": 50 << 20, "VmRSS:": 40 << 20, "RssAnon:": 10 << 20, "RssFile:": 30 << 20} {
		got, err := statusKilobytes(status, key)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s = %d, want %d", key, got, want)
		}
	}
	if _, err := statusKilobytes(status, "VmSwap:"); err == nil {
		t.Error("a missing key succeeded, want an error")
	}
}

func TestReadProcessUsageOfThisProcess(t *testing.T) {
	// Burn a little CPU so that the reading cannot be zero.
	deadline := time.Now().Add(50 * time.Millisecond)
	for n := 0; time.Now().Before(deadline); n++ {
		_ = n * n
	}
	u, err := readProcessUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if u.CPU <= 0 || u.PeakRSS <= 0 || u.RSS <= 0 || u.RSS > u.PeakRSS || u.AnonRSS <= 0 || u.FileRSS <= 0 {
		t.Errorf("implausible usage of this process: %+v", u)
	}
}

// Each part's peak is its own highest sample: the anonymous peak of one moment and the
// file-backed peak of another.
func TestMemoryPeaksKeepEachPartsHighestSample(t *testing.T) {
	var p memoryPeaks
	for _, u := range []processUsage{{AnonRSS: 10, FileRSS: 50}, {AnonRSS: 30, FileRSS: 20}, {AnonRSS: 5, FileRSS: 5}} {
		p.observe(u)
	}
	if anon, file := p.peaks(); anon != 30 || file != 50 {
		t.Errorf("peaks = %d, %d; want 30, 50", anon, file)
	}
}

func TestSampleMemoryObservesUntilCancelledAndSkipsErrors(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	samples := 0
	read := func() (processUsage, error) {
		samples++
		switch samples {
		case 1:
			return processUsage{}, errors.New("process exiting")
		case 3:
			cancel()
		}
		return processUsage{AnonRSS: int64(samples), FileRSS: 7}, nil
	}
	var p memoryPeaks
	sampleMemory(ctx, time.Millisecond, read, &p)
	if anon, file := p.peaks(); samples != 3 || anon != 3 || file != 7 {
		t.Errorf("after %d samples peaks = %d, %d; want 3 samples and 3, 7", samples, anon, file)
	}
}
