package controlplane

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// ProcessSpec describes a child process: the binary, its arguments and where its
// output goes.
type ProcessSpec struct {
	// Name identifies the process in errors and logs, e.g. "kube-apiserver".
	Name string
	// Path is the binary to run.
	Path string
	// Args are the arguments, without the binary itself.
	Args []string
	// Env, when not nil, replaces the environment of the child.
	Env []string
	// LogPath receives stdout and stderr; it is appended to, so that a restarted
	// process keeps the history of the earlier runs in one file.
	LogPath string
}

// Process is a running child. It lives in its own process group, so that a signal
// reaches every descendant and a terminal's Ctrl-C reaches only the parent, which
// then stops the children in order. On Linux the kernel kills it if the parent dies,
// however the parent dies (panic, test timeout, SIGKILL), and what is left of its
// group when it exits is killed, so nothing is left behind.
type Process struct {
	spec    ProcessSpec
	cmd     *exec.Cmd
	logFile *os.File

	// done is closed once the process exited and state/waitErr are set.
	done    chan struct{}
	state   *os.ProcessState
	waitErr error
}

// StartProcess starts the process described by spec.
func StartProcess(spec ProcessSpec) (*Process, error) {
	logFile, err := os.OpenFile(spec.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening log file for %s: %w", spec.Name, err)
	}
	fmt.Fprintf(logFile, "==== %s starting %s %q\n", time.Now().Format(time.RFC3339Nano), spec.Path, spec.Args)

	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Env = spec.Env
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = processAttributes()
	if err := startOnLockedThread(cmd); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", spec.Name, err)
	}

	p := &Process{spec: spec, cmd: cmd, logFile: logFile, done: make(chan struct{})}
	go func() {
		// What is left of the group once its leader exited is killed before the leader
		// is reaped: then the group's id cannot have been given to anyone else.
		awaitExit(cmd.Process.Pid)
		_ = signalGroup(cmd.Process.Pid, syscall.SIGKILL)
		err := cmd.Wait()
		p.state = cmd.ProcessState
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) {
			// An exit status is not an error of the harness; only a failure to wait is.
			p.waitErr = err
		}
		fmt.Fprintf(logFile, "==== %s exited: %v\n", time.Now().Format(time.RFC3339Nano), cmd.ProcessState)
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// Name returns the name from the spec.
func (p *Process) Name() string { return p.spec.Name }

// Pid returns the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// LogPath returns the file holding the process output.
func (p *Process) LogPath() string { return p.spec.LogPath }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Signal sends sig to the process group. Signalling an exited process is a no-op.
func (p *Process) Signal(sig syscall.Signal) error {
	if p.Exited() {
		return nil
	}
	if err := signalGroup(p.cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("sending %v to %s: %w", sig, p.spec.Name, err)
	}
	return nil
}

// Wait waits up to timeout for the process to exit and returns its exit code, which
// is -1 when a signal ended it. It is an error if the process is still running.
func (p *Process) Wait(timeout time.Duration) (int, error) {
	if !p.Exited() {
		select {
		case <-p.done:
		case <-time.After(timeout):
			return 0, fmt.Errorf("%s (pid %d) still running after %v", p.spec.Name, p.Pid(), timeout)
		}
	}
	if p.waitErr != nil {
		return -1, fmt.Errorf("waiting for %s: %w", p.spec.Name, p.waitErr)
	}
	return p.state.ExitCode(), nil
}

// Stop asks the process group to terminate with SIGTERM and kills it with SIGKILL if
// it is still running after grace. It returns once the process has exited.
func (p *Process) Stop(grace time.Duration) {
	if p.Exited() {
		return
	}
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.Signal(syscall.SIGKILL)
		<-p.done
	}
	// Children a process that exited on SIGTERM left in its group were killed before
	// it was reaped (see StartProcess); a group signal now could reach a group that
	// reused its id.
}

// Kill kills the process group with SIGKILL and waits for the process to exit.
func (p *Process) Kill() {
	if p.Exited() {
		return
	}
	_ = p.Signal(syscall.SIGKILL)
	<-p.done
}

// spawnRequests carries commands to the one goroutine that starts every child.
//
// The kernel sends the parent-death signal when the *thread* that forked the child
// exits, not when the process does. Go may retire an idle OS thread at any time, so
// children are forked from a goroutine locked to a thread that never exits. This is
// process-wide by nature, hence a package variable.
var (
	spawnOnce     sync.Once
	spawnRequests chan spawnRequest
)

type spawnRequest struct {
	cmd    *exec.Cmd
	result chan error
}

func startOnLockedThread(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnRequests = make(chan spawnRequest)
		go func() {
			runtime.LockOSThread()
			// Never unlocked and never returns: the thread must outlive every child.
			for req := range spawnRequests {
				req.result <- req.cmd.Start()
			}
		}()
	})
	req := spawnRequest{cmd: cmd, result: make(chan error, 1)}
	spawnRequests <- req
	return <-req.result
}
