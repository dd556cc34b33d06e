package app

// version is mini-kcm's own version. Release builds set it with
// -ldflags "-X github.com/mini-kcm/mini-kcm/app.version=v1.2.3".
var version = "v0.0.0-dev"

// Version returns mini-kcm's version.
func Version() string { return version }

// userAgent names a client in the apiserver's audit log and metrics, e.g.
// "mini-kcm/v1.2.3 (replicaset-controller)".
func userAgent(client string) string {
	return "mini-kcm/" + version + " (" + client + ")"
}
