package controlplane

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// processAttributes puts the child in its own process group and has the kernel kill
// it when the parent dies.
func processAttributes() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// signalGroup sends sig to every process in the group led by pid.
func signalGroup(pid int, sig syscall.Signal) error {
	return syscall.Kill(-pid, sig)
}

// awaitExit returns once the process pid has exited, without reaping it: until it is
// reaped (os/exec's Wait), its pid, and so its process group's id, cannot be reused, so
// that a group signal sent meanwhile reaches what is left of its group and nothing
// else.
func awaitExit(pid int) {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}
