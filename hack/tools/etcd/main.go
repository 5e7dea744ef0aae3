// Command etcd is the etcd server, built from go.etcd.io/etcd/server/v3 for the
// integration and e2e tests. `go install go.etcd.io/etcd/...` refuses to build the
// etcd main module because of its replace directives; this wrapper calls the same
// entry point.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
