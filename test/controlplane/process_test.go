package controlplane

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// When the helper env var is set, the test binary acts as a parent that starts a long
// sleep and waits to be killed; TestChildDiesWhenParentIsKilled kills it.
const helperEnv = "MINI_KCM_CONTROLPLANE_TEST_PARENT"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		p, err := StartProcess(ProcessSpec{Name: "sleep", Path: "/bin/sleep", Args: []string{"600"}, LogPath: os.DevNull})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println(p.Pid())
		time.Sleep(time.Hour)
	}
	os.Exit(m.Run())
}

func TestChildDiesWhenParentIsKilled(t *testing.T) {
	parent := exec.Command(os.Args[0], "-test.run=^$")
	parent.Env = append(os.Environ(), helperEnv+"=1")
	stdout, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("helper said %q", line)
	}
	if err := syscall.Kill(child, 0); err != nil {
		t.Fatalf("child %d not running: %v", child, err)
	}

	_ = parent.Process.Kill()
	_ = parent.Wait()
	eventually(t, 5*time.Second, func() error {
		// The child is re-parented to init, which reaps it; until then it is a zombie.
		if err := syscall.Kill(child, 0); err == nil && !zombie(child) {
			return fmt.Errorf("child %d still running after its parent was killed", child)
		}
		return nil
	})
}

func zombie(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true
	}
	// The state follows the command name in parentheses.
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] == "Z"
}

func TestProcessWaitReportsExitCode(t *testing.T) {
	p, err := StartProcess(ProcessSpec{Name: "false", Path: "/bin/sh", Args: []string{"-c", "echo bye; exit 3"},
		LogPath: filepath.Join(t.TempDir(), "log")})
	if err != nil {
		t.Fatal(err)
	}
	code, err := p.Wait(10 * time.Second)
	if err != nil || code != 3 {
		t.Fatalf("Wait() = %d, %v; want 3, nil", code, err)
	}
	if tail := Tail(p.LogPath(), 2); !strings.Contains(tail, "bye") {
		t.Fatalf("log tail %q lacks the output", tail)
	}
}

func TestProcessStopKillsWhatIgnoresSIGTERM(t *testing.T) {
	p, err := StartProcess(ProcessSpec{Name: "stubborn", Path: "/bin/sh", Args: []string{"-c", "trap '' TERM; sleep 600 & wait"},
		LogPath: filepath.Join(t.TempDir(), "log")})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // let the shell install its trap
	begin := time.Now()
	p.Stop(500 * time.Millisecond)
	if !p.Exited() {
		t.Fatal("process still running after Stop")
	}
	if took := time.Since(begin); took > 5*time.Second {
		t.Fatalf("Stop took %v", took)
	}
}
