package controllers

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"
)

// Options are one controller's own flags, carried by its Descriptor, in the style of
// kube-controller-manager's app/options/*controller.go: the options package adds them to
// the controller's --help section, validates them with all the others and hands them to
// the controller in Config.Options, so it needs to know no controller by name. The
// controller reads them back with OptionsFor.
type Options interface {
	// AddFlags adds the controller's flags, with their defaults, to fs.
	AddFlags(fs *pflag.FlagSet)
	// Validate returns every problem, each naming the flag, the value and the fix.
	Validate() []error
}

// ValidateWorkers reports a worker count below 1: upstream accepts 0 and then silently
// runs no workers, which looks like a hang.
func ValidateWorkers(flag string, value int32) []error {
	if value <= 0 {
		return []error{fmt.Errorf("--%s must be greater than 0, got %d", flag, value)}
	}
	return nil
}

// ValidateBatchPeriod reports a negative batch period, which upstream silently treats
// as 0.
func ValidateBatchPeriod(flag string, value time.Duration) []error {
	if value < 0 {
		return []error{fmt.Errorf("--%s must not be negative, got %s", flag, value)}
	}
	return nil
}

// WorkersOptions are the options of a controller whose one flag is its number of
// workers, --concurrent-<resource>-syncs, like the ReplicaSet and Deployment
// controllers'.
type WorkersOptions struct {
	// ConcurrentSyncs is the number of objects synced in parallel.
	ConcurrentSyncs int32
	// flag and help describe the flag.
	flag, help string
}

// NewWorkersOptions returns the options of the flag --name, with its default and help.
func NewWorkersOptions(name string, def int32, help string) *WorkersOptions {
	return &WorkersOptions{ConcurrentSyncs: def, flag: name, help: help}
}

// AddFlags adds the flag to fs.
func (o *WorkersOptions) AddFlags(fs *pflag.FlagSet) {
	fs.Int32Var(&o.ConcurrentSyncs, o.flag, o.ConcurrentSyncs, o.help)
}

// Validate rejects a worker count that would leave the controller idle.
func (o *WorkersOptions) Validate() []error {
	return ValidateWorkers(o.flag, o.ConcurrentSyncs)
}
