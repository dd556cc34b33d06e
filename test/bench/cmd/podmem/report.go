package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

type shapeJSON struct {
	Pods                     int `json:"pods"`
	Deployments              int `json:"deployments"`
	ReplicaSetsPerDeployment int `json:"replicaSetsPerDeployment"`
	Nodes                    int `json:"nodes"`
}

type report struct {
	Command         string        `json:"command"`
	Date            string        `json:"date"`
	GoVersion       string        `json:"goVersion"`
	Shape           shapeJSON     `json:"shape"`
	PodStructBytes  int           `json:"podStructBytes"`
	Implementations []measurement `json:"implementations"`
}

func (r report) write(dir, name string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name+".md"), []byte(r.markdown()), 0o644)
}

func (r report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# What one cached pod costs: mini-kcm and kube-controller-manager\n\n")
	fmt.Fprintf(&b, "`%s` (%s, %s). %d pods in %d ReplicaSets of %d Deployments over %d nodes, decoded from their protobuf encoding as a watch delivers them (%.0f bytes each on average, managedFields of three writers included), transformed and added to the pod informer's indexer of each pipeline; heap figures after forced collections, in bytes per pod. A `v1.Pod` struct alone is %d bytes.\n\n",
		r.Command, r.Date, r.GoVersion, r.Shape.Pods, r.Shape.Deployments*r.Shape.ReplicaSetsPerDeployment, r.Shape.Deployments, r.Shape.Nodes,
		r.encoded(), r.PodStructBytes)
	b.WriteString("| bytes per pod | " + strings.Join(r.names(), " | ") + " |\n|---|" + strings.Repeat("---|", len(r.Implementations)) + "\n")
	row := func(label string, value func(m measurement) string) {
		cells := make([]string, len(r.Implementations))
		for i, m := range r.Implementations {
			cells[i] = value(m)
		}
		fmt.Fprintf(&b, "| %s | %s |\n", label, strings.Join(cells, " | "))
	}
	bytes := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	row("**cached (objects + store + indexes)**", func(m measurement) string { return "**" + bytes(m.Cached) + "**" })
	row("objects (decoded, transformed pods)", func(m measurement) string { return bytes(m.Objects) })
	row("store (items map and keys)", func(m measurement) string { return bytes(m.Store) })
	for _, name := range r.indexNames() {
		row("index `"+name+"`", func(m measurement) string {
			v, ok := m.Indexes[name]
			if !ok {
				return "–"
			}
			return bytes(v)
		})
	}
	row("garbage of decoding and transforming one pod", func(m measurement) string { return bytes(m.DecodeGarbage) })
	row("allocations of decoding and transforming one pod", func(m measurement) string { return fmt.Sprintf("%.1f", m.DecodeAllocs) })
	row("garbage of adding one pod to the indexer", func(m measurement) string { return bytes(m.AddGarbage) })
	b.WriteString("\nThe indexes are measured one at a time on a store of their own; in the pipeline's indexer they share the store, so objects + store + indexes is close to, not exactly, the cached figure. Not measured here: the informer's DeltaFIFO and watch buffers (transient), the workqueues and expectations (per ReplicaSet or Service, not per pod).\n")
	for _, m := range r.Implementations {
		fmt.Fprintf(&b, "\n## %s: heap profile\n\nIn use after caching the pods, less before (`go tool pprof -top -sample_index=inuse_space -diff_base=<before> <after>`):\n\n```\n%s\n```\n\nAllocated while caching them, less before (`-sample_index=alloc_space`; the pods' encodings, made by `main.podShape`, count here too):\n\n```\n%s\n```\n",
			m.Implementation, m.InuseTop, m.AllocTop)
	}
	return b.String()
}

func (r report) names() []string {
	var names []string
	for _, m := range r.Implementations {
		names = append(names, m.Implementation)
	}
	return names
}

func (r report) indexNames() []string {
	seen := map[string]bool{}
	var names []string
	for _, m := range r.Implementations {
		for name := range m.Indexes {
			if !seen[name] {
				seen[name] = true
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	return names
}

func (r report) encoded() float64 {
	if len(r.Implementations) == 0 {
		return 0
	}
	return r.Implementations[0].EncodedBytes
}
