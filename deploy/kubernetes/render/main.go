// Command render prints the objects that `kubectl apply -k DIR` would apply, built by kustomize's
// own library, as JSON, one object a line. Tests that run the manifests somewhere other than a
// cluster read it: test/container plays them in podman.
//
//	go -C deploy/kubernetes run ./render base
package main

import (
	"fmt"
	"os"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: render DIR")
		os.Exit(2)
	}
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), os.Args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "render: kustomize build %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	for _, r := range m.Resources() {
		b, err := r.MarshalJSON()
		if err != nil {
			fmt.Fprintf(os.Stderr, "render: %s: %v\n", r.CurId(), err)
			os.Exit(1)
		}
		fmt.Printf("%s\n", b)
	}
}
