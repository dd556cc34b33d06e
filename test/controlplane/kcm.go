package controlplane

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// startControllerManager runs kube-controller-manager for node mode, as a cluster runs
// it beside mini-kcm: kubeadm's controller set (every default one plus bootstrapsigner
// and tokencleaner) less Options.NodeControllersOff, each controller with its own
// ServiceAccount's token, and the service-account token and root-CA publisher
// controllers configured with the keys the apiserver trusts. It serves nothing, and
// it is ready once the service account controller made the default ServiceAccount.
func (cp *ControlPlane) startControllerManager(ctx context.Context) error {
	controllers := nodeControllers(cp.opts.NodeControllersOff)
	kubeconfig, err := cp.AddUser("kube-controller-manager", "system:masters")
	if err != nil {
		return err
	}
	p, err := cp.start(KubeControllerManager, []string{
		"--kubeconfig=" + kubeconfig,
		"--controllers=" + controllers,
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + cp.pkiPath("service-account.key"),
		"--root-ca-file=" + cp.pkiPath("ca.crt"),
		"--leader-elect=false",
		"--secure-port=0",
		"--v=1",
	}, nil)
	if err != nil {
		return err
	}
	return cp.waitReady(ctx, p, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if _, err := cp.client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return fmt.Errorf("no default ServiceAccount yet (controllers %s): %w", strings.TrimPrefix(controllers, "*,"), err)
		}
		return nil
	})
}

// nodeControllers is kube-controller-manager's --controllers in node mode: kubeadm's
// value with the given controllers turned off.
func nodeControllers(off []string) string {
	controllers := "*,bootstrapsigner,tokencleaner"
	for _, name := range off {
		controllers += ",-" + name
	}
	return controllers
}
