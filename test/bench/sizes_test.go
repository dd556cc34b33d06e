package bench

import "testing"

func TestScaledMultipliesObjectCountsNotObjectSizes(t *testing.T) {
	got := DefaultSizes().Scaled(4)
	want := Sizes{
		OneReplicaSetPods: 4000, ManyReplicaSets: 800, ManyReplicaSetPods: 5,
		Deployments: 60, DeploymentReplicas: 10, Services: 400, PodsPerService: 20, CeilingPods: 4000,
		SliceServicePods: 20000, ScaleDeployments: 400, ScaleReplicas: 300,
	}
	if got != want {
		t.Errorf("scaled by 4:\n got %+v\nwant %+v", got, want)
	}
	if tiny := DefaultSizes().Scaled(0.0001); tiny.Deployments != 1 || tiny.OneReplicaSetPods != 1 {
		t.Errorf("a tiny scale must keep one object of each: %+v", tiny)
	}
}

func TestParseCount(t *testing.T) {
	tests := []struct {
		in          string
		count, size int
		wantErr     bool
	}{
		{in: "1000", count: 1000},
		{in: "200x5", count: 200, size: 5},
		{in: "0", wantErr: true},
		{in: "10x0", wantErr: true},
		{in: "x5", wantErr: true},
		{in: "12abc", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tt := range tests {
		count, size, err := ParseCount(tt.in)
		if (err != nil) != tt.wantErr || count != tt.count || size != tt.size {
			t.Errorf("ParseCount(%q) = %d, %d, %v; want %d, %d, error %v", tt.in, count, size, err, tt.count, tt.size, tt.wantErr)
		}
	}
}
