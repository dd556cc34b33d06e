package node

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mini-kcm/mini-kcm/controllers/all"
	"github.com/mini-kcm/mini-kcm/hack/rbacgen"
	"github.com/mini-kcm/mini-kcm/leaderelection"
	"github.com/mini-kcm/mini-kcm/test/e2e/framework"
)

// writeVerbs are the audit verbs of a write.
var writeVerbs = map[string]bool{"create": true, "update": true, "patch": true, "delete": true, "deletecollection": true}

// miniKCMNextImage is the release an upgrade moves to: the same binary under another
// tag, so that the StatefulSet's template changes as a release's does.
const miniKCMNextImage = "registry.local/mini-kcm:next"

// TestTheDocumentedUpgradeAndRollback walks deploy/README.md's "Upgrading and rolling
// back" on the real node, each command as the page shows it, with the four controllers
// handed over: the overlay moves to the next image (diff, dry run, apply, rollout
// status), then back (rollout undo, the previous overlay). After each way every replica
// runs the expected image, one of them leads, the hand-over check passes and mini-kcm
// scales the sample; over both, the write fence let no replica write once another had.
func TestTheDocumentedUpgradeAndRollback(t *testing.T) {
	importImages(t)
	cp := framework.ControlPlane(t)
	doc := newDocRunner(t)
	ours := all.Registry().Names()
	// The node's kube-controller-manager runs without the four: handed over.
	doc.manifest(rbacgen.UpstreamControllers(all.Registry()))
	sampleDir := overlay(t, "deploy/sample", map[string]string{agnhostImage: sampleImage})
	kubectl(t, "apply", "-k", sampleDir)
	uninstallSampleOnCleanup(t, sampleDir)

	current := installDeploy(t, "deploy")
	waitPodsReady(t, leaseNamespace, miniKCMLabels, 3, 3*time.Minute)
	waitSampleRolledOut(t, 3)
	began := time.Now()
	check := "mini-kcm handover check --kubeconfig=<admin kubeconfig> --kcm-manifest=/etc/kubernetes/manifests/kube-controller-manager.yaml --want=mini-kcm"
	settled := func(image string, replicas int) {
		t.Helper()
		pods := waitPodsReady(t, leaseNamespace, miniKCMLabels, 3, time.Minute)
		for _, p := range pods {
			if got := p.Spec.Containers[0].Image; got != image {
				t.Errorf("pod %s runs %s, want %s", p.Name, got, image)
			}
		}
		framework.Eventually(t, time.Minute, func() error {
			if holder := leaseHolder(t); !strings.HasPrefix(holder, "mini-kcm-") {
				return fmt.Errorf("the Lease's holder is %q, want a replica", holder)
			}
			return nil
		})
		ownedBy(t, doc.run(check, 0, "OK: each controller has exactly one owner."), ours, "mini-kcm")
		scaleSample(t, replicas)
	}

	// Upgrading.
	doc.overlay = overlay(t, "deploy", map[string]string{deployImageName: miniKCMNextImage})
	doc.run("kubectl diff -k <overlay>", 1, "image: "+miniKCMNextImage)
	doc.run("kubectl apply -k <overlay> --dry-run=server && kubectl apply -k <overlay>", 0, "statefulset.apps/mini-kcm configured")
	doc.run("kubectl -n kube-system rollout status statefulset/mini-kcm --timeout=5m", 0, "rolling update complete")
	settled(miniKCMNextImage, 4)

	// Rolling back.
	doc.run("kubectl -n kube-system rollout undo statefulset/mini-kcm", 0, "rolled back")
	doc.run("kubectl -n kube-system rollout status statefulset/mini-kcm --timeout=5m", 0, "rolling update complete")
	doc.overlay = current
	doc.run("kubectl apply -k <overlay>", 0, "")
	settled(miniKCMImage, 2)

	// The fence across both: each holder's writes end before the next holder's begin,
	// and no holder writes again once another has (a holder identity is one process).
	events, err := cp.ReadAuditLog()
	if err != nil {
		t.Fatal(err)
	}
	type write struct {
		at     time.Time
		holder string
		what   string
	}
	var writes []write
	for i := range events {
		e := &events[i]
		if e.Stage != "ResponseComplete" || e.ObjectRef == nil || e.ImpersonatedUser == nil || e.Code() < 200 || e.Code() >= 300 ||
			e.RequestReceivedTimestamp.Before(began) || !writeVerbs[e.Verb] {
			continue
		}
		if e.ObjectRef.APIGroup == "authentication.k8s.io" {
			// Each replica's SelfSubjectReviews at its start (its identities checked):
			// creates that write nothing, sent by standbys too.
			continue
		}
		if holders := e.ImpersonatedUser.Extra[leaderelection.LeaseHolderExtra]; len(holders) == 1 {
			writes = append(writes, write{e.RequestReceivedTimestamp, holders[0],
				e.Verb + " " + e.RequestURI + " as " + e.ImpersonatedUser.Username})
		}
	}
	sort.Slice(writes, func(i, j int) bool { return writes[i].at.Before(writes[j].at) })
	done := map[string]bool{}
	holders := 0
	for i, w := range writes {
		if i > 0 && writes[i-1].holder != w.holder {
			done[writes[i-1].holder] = true
			if done[w.holder] {
				t.Errorf("%s wrote again at %s after another holder had written: %s", w.holder, w.at.Format("15:04:05.000"), w.what)
			}
		}
		if i == 0 || writes[i-1].holder != w.holder {
			holders++
		}
	}
	if t.Failed() {
		var b strings.Builder
		for _, w := range writes {
			fmt.Fprintf(&b, "\n  %s %s: %s", w.at.Format("15:04:05.000000"), w.holder, w.what)
		}
		t.Logf("the controllers' accepted writes in order:%s", b.String())
	}
	t.Logf("NODE-NUMBERS upgrade and rollback: %d accepted controller writes by %d holders in turn", len(writes), holders)
	if holders < 2 {
		t.Errorf("%d holders wrote over an upgrade and a rollback, which replace every replica: the check proves nothing", holders)
	}
}
