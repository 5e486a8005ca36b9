// The kubernetes_resource data source: one object of the parent cluster, read from the apiserver
// the provider block names (host, CA, token or client certificate), as hashicorp/kubernetes
// reads it. An object that does not exist reads as a null `object`, as the real data source
// answers. With $STRATUS_KUBERNETES_NO_PARENT set no apiserver is contacted and every object
// reads as absent: it stands in for the empty namespace of a first converge in plans that run
// without an apiserver.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-go/tfprotov5"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// The environment variable that makes every read find nothing, without an apiserver.
const noParentEnv = "STRATUS_KUBERNETES_NO_PARENT"

// kubernetes_resource as hashicorp/kubernetes 2.38.0 declares it (the arguments the layouts use).
var resourceData = block{
	attrs: []attr{
		{name: "api_version", typ: str, mode: "req"},
		{name: "kind", typ: str, mode: "req"},
		{name: "object", typ: dyn, mode: "optcomp"},
	},
	blocks: []block{
		{name: "metadata", single: true, attrs: []attr{
			{name: "name", typ: str, mode: "req"}, {name: "namespace", typ: str, mode: "opt"},
		}},
	},
}

// The data sources the stand-in serves.
func dataSources() map[string]block {
	return map[string]block{"kubernetes_resource": resourceData}
}

// connection is the provider block's way to the apiserver.
type connection struct {
	host, token, ca, cert, key string
	insecure                   bool
}

func connectionOf(config tftypes.Value) (connection, error) {
	var vals map[string]tftypes.Value
	if err := config.As(&vals); err != nil {
		return connection{}, err
	}
	text := func(name string) string {
		var s string
		if v, ok := vals[name]; ok && v.IsKnown() && !v.IsNull() {
			_ = v.As(&s)
		}
		return s
	}
	c := connection{
		host: text("host"), token: text("token"), ca: text("cluster_ca_certificate"),
		cert: text("client_certificate"), key: text("client_key"),
	}
	if v, ok := vals["insecure"]; ok && v.IsKnown() && !v.IsNull() {
		_ = v.As(&c.insecure)
	}
	return c, nil
}

func (c connection) client() (*http.Client, error) {
	tlsConfig := &tls.Config{InsecureSkipVerify: c.insecure} //nolint:gosec // the kubeconfig asks for it
	if c.ca != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(c.ca)) {
			return nil, fmt.Errorf("cluster_ca_certificate holds no PEM certificate")
		}
		tlsConfig.RootCAs = pool
	}
	if c.cert != "" || c.key != "" {
		pair, err := tls.X509KeyPair([]byte(c.cert), []byte(c.key))
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		tlsConfig.Certificates = []tls.Certificate{pair}
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}, nil
}

// get fetches path from the apiserver; found is false on 404.
func (c connection) get(ctx context.Context, path string) (body []byte, found bool, err error) {
	client, err := c.client()
	if err != nil {
		return nil, false, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(c.host, "/")+path, nil)
	if err != nil {
		return nil, false, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, false, err
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(resp.Body)
	if err != nil {
		return nil, false, err
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, false, nil
	case resp.StatusCode != http.StatusOK:
		return nil, false, fmt.Errorf("GET %s: %s: %s", path, resp.Status, bytes.TrimSpace(body))
	}
	return body, true, nil
}

// readObject reads the named object: the resource's plural name comes from discovery.
func (c connection) readObject(ctx context.Context, apiVersion, kind, name, namespace string) (map[string]interface{}, error) {
	if c.host == "" {
		return nil, fmt.Errorf("the provider block names no host")
	}
	groupPath := "/apis/" + apiVersion
	if !strings.Contains(apiVersion, "/") {
		groupPath = "/api/" + apiVersion
	}
	body, found, err := c.get(ctx, groupPath)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("the apiserver serves no %s", apiVersion)
	}
	var discovery struct {
		Resources []struct {
			Name       string `json:"name"`
			Kind       string `json:"kind"`
			Namespaced bool   `json:"namespaced"`
		} `json:"resources"`
	}
	if err := json.Unmarshal(body, &discovery); err != nil {
		return nil, fmt.Errorf("discovery of %s: %w", apiVersion, err)
	}
	path := ""
	for _, r := range discovery.Resources {
		if r.Kind == kind && !strings.Contains(r.Name, "/") {
			path = groupPath
			if r.Namespaced {
				path += "/namespaces/" + url.PathEscape(namespace)
			}
			path += "/" + r.Name + "/" + url.PathEscape(name)
		}
	}
	if path == "" {
		return nil, fmt.Errorf("the apiserver serves no kind %s in %s", kind, apiVersion)
	}
	body, found, err = c.get(ctx, path)
	if err != nil || !found {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var object map[string]interface{}
	if err := dec.Decode(&object); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return object, nil
}

func (s *server) ValidateDataSourceConfig(_ context.Context, req *tfprotov5.ValidateDataSourceConfigRequest) (*tfprotov5.ValidateDataSourceConfigResponse, error) {
	if _, ok := dataSources()[req.TypeName]; !ok {
		return &tfprotov5.ValidateDataSourceConfigResponse{Diagnostics: fail("no data source %s", req.TypeName)}, nil
	}
	return &tfprotov5.ValidateDataSourceConfigResponse{}, nil
}

func (s *server) ReadDataSource(ctx context.Context, req *tfprotov5.ReadDataSourceRequest) (*tfprotov5.ReadDataSourceResponse, error) {
	b, ok := dataSources()[req.TypeName]
	if !ok {
		return &tfprotov5.ReadDataSourceResponse{Diagnostics: fail("no data source %s", req.TypeName)}, nil
	}
	typ := b.objectType()
	config, err := req.Config.Unmarshal(typ)
	if err != nil {
		return nil, err
	}
	var vals map[string]tftypes.Value
	if err := config.As(&vals); err != nil {
		return nil, err
	}
	var apiVersion, kind, name, namespace string
	_ = vals["api_version"].As(&apiVersion)
	_ = vals["kind"].As(&kind)
	var meta map[string]tftypes.Value
	if err := vals["metadata"].As(&meta); err != nil || meta == nil {
		return &tfprotov5.ReadDataSourceResponse{Diagnostics: fail("%s: a metadata block is required", req.TypeName)}, nil
	}
	_ = meta["name"].As(&name)
	if !meta["namespace"].IsNull() {
		_ = meta["namespace"].As(&namespace)
	}
	object := tftypes.NewValue(tftypes.DynamicPseudoType, nil)
	if os.Getenv(noParentEnv) == "" {
		found, err := s.parent.readObject(ctx, apiVersion, kind, name, namespace)
		if err != nil {
			return &tfprotov5.ReadDataSourceResponse{Diagnostics: fail("reading %s %s/%s: %v", kind, namespace, name, err)}, nil
		}
		if found != nil {
			object = infer(found)
		}
	}
	vals["object"] = object
	dv, err := tfprotov5.NewDynamicValue(typ, tftypes.NewValue(typ, vals))
	if err != nil {
		return nil, err
	}
	return &tfprotov5.ReadDataSourceResponse{State: &dv}, nil
}
