package controllers

import (
	"strings"
	"testing"
	"time"
)

type projectionKey struct {
	Namespace string
	Labels    map[string]string
}

// A key that is not a string is kept as it is and formatted only when Check reports it.
func TestInFlightSyncsCheckFormatsAKeyThatIsNotAString(t *testing.T) {
	now := time.Unix(0, 0)
	s := &InFlightSyncs{Threshold: time.Minute, Now: func() time.Time { return now }}
	done := s.Started("endpoints-controller", &projectionKey{Namespace: "default", Labels: map[string]string{"app": "web"}})
	defer done()
	now = now.Add(2 * time.Minute)
	err := s.Check()
	if err == nil || !strings.Contains(err.Error(), `endpoints-controller has synced "&{default map[app:web]}" for 2m0s`) {
		t.Fatalf("Check() = %v, want it to name the controller and the formatted key", err)
	}
}
