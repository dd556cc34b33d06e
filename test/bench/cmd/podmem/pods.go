package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
)

// podShape is the shape of the cluster the pods belong to: the bench-scale workload's
// Deployments, each with ReplicaSets of its own, over KWOK nodes.
type podShape struct {
	pods, deployments, replicaSetsPerDeployment, nodes int
}

// pods makes the encoded pods of the shape, pods [from, to), as a watch delivers them
// to an informer in the protobuf encoding: created by a ReplicaSet controller from the
// bench's pod template (test/bench/objects.go), defaulted and admitted by the
// apiserver (the bench's control plane disables ServiceAccount admission, so no token
// volume), bound by the scheduler and made Running and Ready by KWOK's pod-ready stage
// (test/controlplane/kwok.go), with the managedFields of those three writers.
func (s podShape) encoded(from, to int) ([][]byte, error) {
	serializer := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	out := make([][]byte, 0, to-from)
	var buf bytes.Buffer
	for i := from; i < to; i++ {
		buf.Reset()
		if err := serializer.Encode(s.pod(i), &buf); err != nil {
			return nil, err
		}
		out = append(out, bytes.Clone(buf.Bytes()))
	}
	return out, nil
}

var epoch = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// pod returns pod i of the shape. Pods are spread over the ReplicaSets in turn, and
// the ReplicaSets over the Deployments, so that every ReplicaSet has pods/replicaSets.
func (s podShape) pod(i int) *corev1.Pod {
	replicaSets := s.deployments * s.replicaSetsPerDeployment
	rs := i % replicaSets
	deployment := rs % s.deployments
	rng := rand.New(rand.NewPCG(uint64(i), 7))
	app := fmt.Sprintf("scale-%03d", deployment)
	hash := templateHash(rs)
	rsName := app + "-" + hash
	name := rsName + "-" + randomSuffix(rng)
	node := fmt.Sprintf("kwok-node-%d", i%s.nodes)
	created := metav1.NewTime(epoch.Add(time.Duration(i) * 10 * time.Millisecond))
	ready := metav1.NewTime(created.Add(2 * time.Second))
	podIP := fmt.Sprintf("10.%d.%d.%d", 64+i/65536, i/256%256, i%256)
	hostIP := fmt.Sprintf("10.0.0.%d", 2+i%s.nodes)
	managed := func(manager, subresource, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{
			Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
			Time: &created, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields), Subresource: subresource,
		}
	}
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, GenerateName: rsName + "-", Namespace: "bench-scale",
			UID:               types.UID(uuid(rng)),
			ResourceVersion:   fmt.Sprint(100000 + 3*i),
			CreationTimestamp: created,
			Labels:            map[string]string{"app": app, "pod-template-hash": hash},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rsName, UID: types.UID(uuid(rand.New(rand.NewPCG(uint64(rs), 11)))),
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
			ManagedFields: []metav1.ManagedFieldsEntry{
				managed("kube-controller-manager", "", `{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:app":{},"f:pod-template-hash":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"`+hash+`\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:env":{".":{},"k:{\"name\":\"LOG_LEVEL\"}":{".":{},"f:name":{},"f:value":{}},"k:{\"name\":\"POD_NAME\"}":{".":{},"f:name":{},"f:valueFrom":{".":{},"f:fieldRef":{}}},"k:{\"name\":\"VERSION\"}":{".":{},"f:name":{},"f:value":{}}},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:ports":{".":{},"k:{\"containerPort\":8080,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:name":{},"f:protocol":{}}},"f:readinessProbe":{".":{},"f:failureThreshold":{},"f:httpGet":{".":{},"f:path":{},"f:port":{},"f:scheme":{}},"f:periodSeconds":{},"f:successThreshold":{},"f:timeoutSeconds":{}},"f:resources":{".":{},"f:requests":{".":{},"f:cpu":{},"f:memory":{}}},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{}}},"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{}}}`),
				managed("kube-scheduler", "status", `{"f:status":{"f:conditions":{".":{},"k:{\"type\":\"PodScheduled\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}}}}`),
				managed("kwok", "status", `{"f:status":{"f:conditions":{"k:{\"type\":\"ContainersReady\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Initialized\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Ready\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}},"f:containerStatuses":{},"f:hostIP":{},"f:hostIPs":{},"f:phase":{},"f:podIP":{},"f:podIPs":{".":{},"k:{\"ip\":\"`+podIP+`\"}":{".":{},"f:ip":{}}},"f:startTime":{}}}`),
			},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:  "app",
				Image: "registry.k8s.io/pause:3.10",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
				Env: []corev1.EnvVar{
					{Name: "VERSION", Value: "1"},
					{Name: "LOG_LEVEL", Value: "info"},
					{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
				},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse("10m"),
					corev1.ResourceMemory: resource.MustParse("16Mi"),
				}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http"), Scheme: corev1.URISchemeHTTP}},
					TimeoutSeconds:   1,
					PeriodSeconds:    10,
					SuccessThreshold: 1,
					FailureThreshold: 3,
				},
				TerminationMessagePath:   corev1.TerminationMessagePathDefault,
				TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				ImagePullPolicy:          corev1.PullIfNotPresent,
			}},
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			DNSPolicy:                     corev1.DNSClusterFirst,
			NodeName:                      node,
			SecurityContext:               &corev1.PodSecurityContext{},
			SchedulerName:                 corev1.DefaultSchedulerName,
			Tolerations: []corev1.Toleration{
				{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
				{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
			},
			Priority:           ptr.To[int32](0),
			EnableServiceLinks: ptr.To(true),
			PreemptionPolicy:   ptr.To(corev1.PreemptLowerPriority),
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: ready},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: ready},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: ready},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: created},
			},
			HostIP:    hostIP,
			HostIPs:   []corev1.HostIP{{IP: hostIP}},
			PodIP:     podIP,
			PodIPs:    []corev1.PodIP{{IP: podIP}},
			StartTime: &ready,
			ContainerStatuses: []corev1.ContainerStatus{{
				Name: "app", Image: "registry.k8s.io/pause:3.10", ImageID: "registry.k8s.io/pause:3.10",
				Ready: true, Started: ptr.To(true),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: ready}},
			}},
			QOSClass: corev1.PodQOSBurstable,
		},
	}
}

// templateHash is a pod-template-hash-like value of ReplicaSet rs: ten characters of
// the alphabet the Deployment controller uses.
func templateHash(rs int) string {
	return randomString(rand.New(rand.NewPCG(uint64(rs), 13)), 10)
}

func randomSuffix(rng *rand.Rand) string { return randomString(rng, 5) }

// randomString is what k8s.io/apimachinery/pkg/util/rand.String makes: n characters
// of an alphabet without vowels or look-alikes.
func randomString(rng *rand.Rand, n int) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return string(b)
}

func uuid(rng *rand.Rand) string {
	return fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", rng.Uint32(), rng.Uint32()&0xffff, 0x4000|rng.Uint32()&0x0fff, 0x8000|rng.Uint32()&0x3fff, rng.Uint64()&0xffffffffffff)
}
