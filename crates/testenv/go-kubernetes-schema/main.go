// A schema-only stand-in for the hashicorp/kubernetes provider, for the Stratus layout tests.
//
// The Go module proxy refuses terraform-provider-kubernetes v2.38.0 (403), so the takeover plans
// of the DVP layouts run against this provider. It declares kubernetes_manifest, kubernetes_secret
// and kubernetes_secret_v1 as hashicorp/kubernetes 2.38.0 does, and the two types Deckhouse's own
// build of the provider adds (kubernetes_resource_ready_v1, kubernetes_owner_references_v1), so
// that tofu can read a state Deckhouse's layouts wrote. With $STRATUS_KUBERNETES_STOCK set it
// lacks Deckhouse's two types, as the stock provider does.
//
// Its resources never call an apiserver. Its one data source, kubernetes_resource, reads the
// object from the apiserver the provider block names (datasource.go), so that a layout reading
// back what the parent cluster allocated plans with the parent's real answer. It reads a state's
// JSON as it is (a dynamic attribute wrapped as tofu writes it, or bare), and plans at the schema
// level only:
//   - kubernetes_manifest: a change of apiVersion, kind, metadata.name or metadata.namespace
//     replaces the object, as the real provider does; any other change of the manifest is an
//     in-place update whose `object` is unknown; an unchanged manifest keeps its `object`;
//   - other types: their identifying arguments replace, everything else updates in place;
//     computed attributes are unknown on create.
//
// Apply and import are refused: the stand-in exists to plan.
package main

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"sort"

	"github.com/hashicorp/terraform-plugin-go/tfprotov5"
	"github.com/hashicorp/terraform-plugin-go/tfprotov5/tf5server"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

type server struct {
	types  map[string]resource
	parent connection
}

func fail(format string, args ...interface{}) []*tfprotov5.Diagnostic {
	return []*tfprotov5.Diagnostic{{
		Severity: tfprotov5.DiagnosticSeverityError,
		Summary:  "kubernetes stand-in: " + fmt.Sprintf(format, args...),
	}}
}

func (s *server) GetMetadata(context.Context, *tfprotov5.GetMetadataRequest) (*tfprotov5.GetMetadataResponse, error) {
	resp := &tfprotov5.GetMetadataResponse{}
	for _, name := range s.names() {
		resp.Resources = append(resp.Resources, tfprotov5.ResourceMetadata{TypeName: name})
	}
	for name := range dataSources() {
		resp.DataSources = append(resp.DataSources, tfprotov5.DataSourceMetadata{TypeName: name})
	}
	return resp, nil
}

func (s *server) names() []string {
	var names []string
	for name := range s.types {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func (s *server) GetProviderSchema(context.Context, *tfprotov5.GetProviderSchemaRequest) (*tfprotov5.GetProviderSchemaResponse, error) {
	resp := &tfprotov5.GetProviderSchemaResponse{
		Provider:          &tfprotov5.Schema{Block: providerBlock.schema()},
		ResourceSchemas:   map[string]*tfprotov5.Schema{},
		DataSourceSchemas: map[string]*tfprotov5.Schema{},
	}
	for name, r := range s.types {
		resp.ResourceSchemas[name] = &tfprotov5.Schema{Version: schemaVersion, Block: r.block().schema()}
	}
	for name, b := range dataSources() {
		resp.DataSourceSchemas[name] = &tfprotov5.Schema{Block: b.schema()}
	}
	return resp, nil
}

func (s *server) PrepareProviderConfig(_ context.Context, req *tfprotov5.PrepareProviderConfigRequest) (*tfprotov5.PrepareProviderConfigResponse, error) {
	return &tfprotov5.PrepareProviderConfigResponse{PreparedConfig: req.Config}, nil
}

func (s *server) ConfigureProvider(_ context.Context, req *tfprotov5.ConfigureProviderRequest) (*tfprotov5.ConfigureProviderResponse, error) {
	config, err := req.Config.Unmarshal(providerBlock.objectType())
	if err != nil {
		return nil, err
	}
	s.parent, err = connectionOf(config)
	if err != nil {
		return &tfprotov5.ConfigureProviderResponse{Diagnostics: fail("provider configuration: %v", err)}, nil
	}
	return &tfprotov5.ConfigureProviderResponse{}, nil
}

func (s *server) StopProvider(context.Context, *tfprotov5.StopProviderRequest) (*tfprotov5.StopProviderResponse, error) {
	return &tfprotov5.StopProviderResponse{}, nil
}

func (s *server) ValidateResourceTypeConfig(_ context.Context, req *tfprotov5.ValidateResourceTypeConfigRequest) (*tfprotov5.ValidateResourceTypeConfigResponse, error) {
	if _, ok := s.types[req.TypeName]; !ok {
		return &tfprotov5.ValidateResourceTypeConfigResponse{Diagnostics: fail("no resource type %s", req.TypeName)}, nil
	}
	return &tfprotov5.ValidateResourceTypeConfigResponse{}, nil
}

func (s *server) UpgradeResourceState(_ context.Context, req *tfprotov5.UpgradeResourceStateRequest) (*tfprotov5.UpgradeResourceStateResponse, error) {
	r, ok := s.types[req.TypeName]
	if !ok {
		return &tfprotov5.UpgradeResourceStateResponse{Diagnostics: fail("no resource type %s", req.TypeName)}, nil
	}
	if req.RawState == nil || req.RawState.JSON == nil {
		return &tfprotov5.UpgradeResourceStateResponse{Diagnostics: fail("%s: only JSON states are read", req.TypeName)}, nil
	}
	val, err := decodeState(r.block(), req.RawState.JSON)
	if err != nil {
		return &tfprotov5.UpgradeResourceStateResponse{Diagnostics: fail("%s: %v", req.TypeName, err)}, nil
	}
	dv, err := tfprotov5.NewDynamicValue(r.block().objectType(), val)
	if err != nil {
		return nil, err
	}
	return &tfprotov5.UpgradeResourceStateResponse{UpgradedState: &dv}, nil
}

func (s *server) ReadResource(_ context.Context, req *tfprotov5.ReadResourceRequest) (*tfprotov5.ReadResourceResponse, error) {
	return &tfprotov5.ReadResourceResponse{NewState: req.CurrentState, Private: req.Private}, nil
}

func (s *server) PlanResourceChange(_ context.Context, req *tfprotov5.PlanResourceChangeRequest) (*tfprotov5.PlanResourceChangeResponse, error) {
	r, ok := s.types[req.TypeName]
	if !ok {
		return &tfprotov5.PlanResourceChangeResponse{Diagnostics: fail("no resource type %s", req.TypeName)}, nil
	}
	typ := r.block().objectType()
	proposed, err := req.ProposedNewState.Unmarshal(typ)
	if err != nil {
		return nil, err
	}
	prior, err := req.PriorState.Unmarshal(typ)
	if err != nil {
		return nil, err
	}
	if proposed.IsNull() {
		return &tfprotov5.PlanResourceChangeResponse{PlannedState: req.ProposedNewState}, nil
	}
	planned, err := plan(req.TypeName, r, prior, proposed)
	if err != nil {
		return &tfprotov5.PlanResourceChangeResponse{Diagnostics: fail("%s: %v", req.TypeName, err)}, nil
	}
	dv, err := tfprotov5.NewDynamicValue(typ, planned)
	if err != nil {
		return nil, err
	}
	resp := &tfprotov5.PlanResourceChangeResponse{PlannedState: &dv}
	if !prior.IsNull() {
		for _, p := range r.replace {
			resp.RequiresReplace = append(resp.RequiresReplace, attributePath(p))
		}
	}
	return resp, nil
}

// plan is the planned state: the proposed one, with computed attributes unknown on create and,
// for kubernetes_manifest, the object kept only while the manifest is unchanged.
func plan(name string, r resource, prior, proposed tftypes.Value) (tftypes.Value, error) {
	var vals map[string]tftypes.Value
	if err := proposed.As(&vals); err != nil {
		return tftypes.Value{}, err
	}
	var before map[string]tftypes.Value
	if !prior.IsNull() {
		if err := prior.As(&before); err != nil {
			return tftypes.Value{}, err
		}
	}
	for _, a := range r.attrs {
		computed := a.mode == "comp" || a.mode == "optcomp"
		if computed && prior.IsNull() && vals[a.name].IsNull() {
			vals[a.name] = tftypes.NewValue(a.typ, tftypes.UnknownValue)
		}
	}
	if name == "kubernetes_manifest" {
		m := vals["manifest"]
		same := before != nil && m.IsFullyKnown() && reflect.DeepEqual(plain(m), plain(before["manifest"]))
		if same {
			vals["object"] = before["object"]
		} else {
			vals["object"] = tftypes.NewValue(tftypes.DynamicPseudoType, tftypes.UnknownValue)
		}
	}
	return tftypes.NewValue(proposed.Type(), vals), nil
}

func attributePath(p []string) *tftypes.AttributePath {
	path := tftypes.NewAttributePath()
	for _, step := range p {
		if step == "#0" {
			path = path.WithElementKeyInt(0)
		} else {
			path = path.WithAttributeName(step)
		}
	}
	return path
}

func (s *server) ApplyResourceChange(_ context.Context, req *tfprotov5.ApplyResourceChangeRequest) (*tfprotov5.ApplyResourceChangeResponse, error) {
	return &tfprotov5.ApplyResourceChangeResponse{Diagnostics: fail("%s: the stand-in plans only, it never applies", req.TypeName)}, nil
}

func (s *server) ImportResourceState(_ context.Context, req *tfprotov5.ImportResourceStateRequest) (*tfprotov5.ImportResourceStateResponse, error) {
	return &tfprotov5.ImportResourceStateResponse{Diagnostics: fail("%s: the stand-in cannot import", req.TypeName)}, nil
}

func main() {
	err := tf5server.Serve("registry.opentofu.org/hashicorp/kubernetes", func() tfprotov5.ProviderServer {
		return &server{types: resources()}
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
