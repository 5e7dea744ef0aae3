package capiinfra

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

//go:embed crds/*.yaml
var crdFiles embed.FS

// CRDs returns the provider's CustomResourceDefinitions as YAML files.
func CRDs() [][]byte {
	var out [][]byte
	err := fs.WalkDir(crdFiles, "crds", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := crdFiles.ReadFile(path)
		out = append(out, data)
		return err
	})
	if err != nil {
		panic(err) // embedded at build time
	}
	return out
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallCRDs creates (or updates) the CustomResourceDefinitions in the YAML
// files, which may hold several documents each, and waits until every one is
// Established, that is until its API is served.
func InstallCRDs(ctx context.Context, cfg *rest.Config, files ...[]byte) error {
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	crds := client.Resource(crdGVR)
	var names []string
	for _, file := range files {
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(file), 4096)
		for {
			obj := &unstructured.Unstructured{}
			if err := dec.Decode(&obj.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return fmt.Errorf("decoding a CRD: %w", err)
			}
			if obj.Object == nil {
				continue // an empty document
			}
			if obj.GetKind() != "CustomResourceDefinition" {
				return fmt.Errorf("%s %s is no CustomResourceDefinition", obj.GetKind(), obj.GetName())
			}
			if err := apply(ctx, crds, obj); err != nil {
				return err
			}
			names = append(names, obj.GetName())
		}
	}
	for _, name := range names {
		var status string
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			crd, err := crds.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			for _, c := range conds {
				c, _ := c.(map[string]any)
				if c["type"] == "Established" {
					status = fmt.Sprintf("Established=%v: %v", c["status"], c["message"])
					return c["status"] == "True", nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("waiting for CRD %s to be established (%s): %w", name, status, err)
		}
	}
	return nil
}

// apply creates the CRD, or replaces the one of the same name.
func apply(ctx context.Context, crds dynamic.ResourceInterface, obj *unstructured.Unstructured) error {
	_, err := crds.Create(ctx, obj, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("creating CRD %s: %w", obj.GetName(), err)
		}
		return nil
	}
	old, err := crds.Get(ctx, obj.GetName(), metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading CRD %s: %w", obj.GetName(), err)
	}
	obj.SetResourceVersion(old.GetResourceVersion())
	if _, err := crds.Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating CRD %s: %w", obj.GetName(), err)
	}
	return nil
}
