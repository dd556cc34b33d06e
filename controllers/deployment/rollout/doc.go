// Package rollout holds the pure arithmetic and bookkeeping of a Deployment rollout:
// resolving maxSurge/maxUnavailable, sizing the new ReplicaSet, proportional scaling,
// revisions and their annotations, the pod-template hash, and the Deployment
// conditions. Nothing here talks to the apiserver or reads a cache, so every rule can be
// tested with plain objects; the controller in the parent package decides when to apply
// them and writes the results.
//
// The rules follow kube-controller-manager v1.37.2 (pkg/controller/deployment/util)
// closely, because users and tools (kubectl rollout, dashboards, the scale subresource)
// depend on the exact numbers, annotations and condition reasons it produces.
package rollout
