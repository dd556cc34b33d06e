// Command mini-kcm runs controllers of the Kubernetes controller manager (controllers/all
// lists them; --help too), with leader election for high availability.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"           // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo"  // rest client and leader election metrics
	_ "k8s.io/component-base/metrics/prometheus/workqueue" // workqueue_* metrics

	// Also kubernetes_build_info, with values for unstamped builds too (app/version.go).
	"github.com/mini-kcm/mini-kcm/app"
)

func main() {
	os.Exit(cli.Run(app.NewCommand()))
}
