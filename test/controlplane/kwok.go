package controlplane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// fakeNodeAnnotation marks the nodes that KWOK manages; KWOK leaves every other node
// alone, so a test can still register a node that stays NotReady.
const fakeNodeAnnotation = "kwok.x-k8s.io/node"

// kwokStages play the kubelet's part. KWOK runs no stage it is not given (the defaults
// live in kwokctl, not in the kwok binary), so these are the whole behaviour:
//
//   - node-initialize: a managed node becomes Ready and gets addresses, capacity and
//     node info unless it already has them;
//   - node-heartbeat: the Ready condition is refreshed every few minutes, while the
//     node Lease (--node-lease-duration-seconds) is the frequent heartbeat, as on a
//     real kubelet;
//   - pod-ready: a pod bound to a managed node becomes Running and Ready at once, with
//     a pod IP from --cidr and its node's IP as host IP;
//   - pod-delete: a pod being deleted is removed with grace period 0 once it has no
//     finalizers, as a kubelet does after its containers stopped.
//
// The templates follow KWOK v0.8.0's "fast" stages (kustomize/stage/{node,pod}/fast).
const kwokStages = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-initialize
spec:
  resourceRef:
    apiGroup: v1
    kind: Node
  selector:
    matchExpressions:
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'NotIn'
      values: ['True']
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      {{ range NodeConditions }}
      - lastHeartbeatTime: {{ $now | Quote }}
        lastTransitionTime: {{ $now | Quote }}
        message: {{ .message | Quote }}
        reason: {{ .reason | Quote }}
        status: {{ .status | Quote }}
        type: {{ .type | Quote }}
      {{ end }}
      {{ with .status.addresses }}
      addresses:
      {{ YAML . 1 }}
      {{ else }}
      addresses:
      - address: {{ NodeIP | Quote }}
        type: InternalIP
      - address: {{ NodeName | Quote }}
        type: Hostname
      {{ end }}
      allocatable:
      {{ with .status.allocatable }}
      {{ YAML . 1 }}
      {{ else }}
        cpu: "1k"
        memory: 1Ti
        pods: "10k"
      {{ end }}
      capacity:
      {{ with .status.capacity }}
      {{ YAML . 1 }}
      {{ else }}
        cpu: "1k"
        memory: 1Ti
        pods: "10k"
      {{ end }}
      nodeInfo:
        architecture: amd64
        operatingSystem: linux
        kubeletVersion: {{ printf "kwok-%s" Version | Quote }}
        kubeProxyVersion: {{ printf "kwok-%s" Version | Quote }}
        containerRuntimeVersion: {{ printf "kwok-%s" Version | Quote }}
        kernelVersion: {{ printf "kwok-%s" Version | Quote }}
      phase: Running
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-heartbeat
spec:
  resourceRef:
    apiGroup: v1
    kind: Node
  selector:
    matchExpressions:
    - key: '.status.phase'
      operator: 'In'
      values: ['Running']
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'In'
      values: ['True']
  delay:
    durationMilliseconds: 240000
    jitterDurationMilliseconds: 300000
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      {{ range .status.conditions }}
      - lastHeartbeatTime: {{ $now | Quote }}
        lastTransitionTime: {{ .lastTransitionTime | Quote }}
        message: {{ .message | Quote }}
        reason: {{ .reason | Quote }}
        status: {{ .status | Quote }}
        type: {{ .type | Quote }}
      {{ end }}
  immediateNextStage: true
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-ready
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values: ['Pending']
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'NotIn'
      values: ['True']
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Initialized
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: ContainersReady
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Ready
      {{ range .spec.readinessGates }}
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: {{ .conditionType | Quote }}
      {{ end }}
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        imageID: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: true
        started: true
        restartCount: 0
        state:
          running:
            startedAt: {{ $now | Quote }}
      {{ end }}
      initContainerStatuses:
      {{ range .spec.initContainers }}
      - image: {{ .image | Quote }}
        imageID: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: true
        restartCount: 0
        state:
          terminated:
            exitCode: 0
            finishedAt: {{ $now | Quote }}
            reason: Completed
            startedAt: {{ $now | Quote }}
      {{ end }}
      {{ with NodeIPsWith .spec.nodeName }}
      hostIP: {{ index . 0 | Quote }}
      hostIPs:
      {{ range . }}
      - ip: {{ . | Quote }}
      {{ end }}
      {{ end }}
      {{ with PodIPsWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) }}
      podIP: {{ index . 0 | Quote }}
      podIPs:
      {{ range . }}
      - ip: {{ . | Quote }}
      {{ end }}
      {{ end }}
      phase: Running
      startTime: {{ $now | Quote }}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-delete
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'Exists'
    - key: '.metadata.finalizers'
      operator: 'DoesNotExist'
  next:
    delete: true
`

func (cp *ControlPlane) startKWOK(context.Context) error {
	kubeconfig, err := cp.AddUser("kwok-controller", "system:masters")
	if err != nil {
		return err
	}
	dir := filepath.Join(cp.dir, "kwok")
	stagesPath := filepath.Join(dir, "stages.yaml")
	if err := os.WriteFile(stagesPath, []byte(kwokStages), 0o600); err != nil {
		return fmt.Errorf("writing KWOK stages: %w", err)
	}
	// KWOK also loads ~/.kwok/kwok.yaml when it exists; a private HOME keeps a
	// developer's own KWOK configuration out of the tests.
	env := []string{"HOME=" + dir}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	_, err = cp.start(KWOK, []string{
		"--kubeconfig=" + kubeconfig,
		"--config=" + stagesPath,
		"--manage-nodes-with-annotation-selector=" + fakeNodeAnnotation + "=fake",
		"--cidr=" + podCIDR,
		"--node-lease-duration-seconds=40",
		// One line per pod transition at INFO would dwarf every other log.
		"--v=WARN",
	}, env)
	// KWOK serves nothing to probe; registerNodes waits until it made the nodes Ready.
	return err
}
