// The schemas the stand-in declares: hashicorp/kubernetes 2.38.0's types the DVP layouts (ours and
// Deckhouse's) use, and the two types Deckhouse's own build of the provider adds.
package main

import (
	"os"

	"github.com/hashicorp/terraform-plugin-go/tfprotov5"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// The newest state schema version any type may carry; older ones are read as they are.
const schemaVersion = 1

// An attribute: mode is "req", "opt", "comp" or "optcomp".
type attr struct {
	name      string
	typ       tftypes.Type
	mode      string
	sensitive bool
}

// A nested block: a list of at most max (0: unlimited), or a single block.
type block struct {
	name   string
	single bool
	max    int64
	attrs  []attr
	blocks []block
}

// One resource type. replace lists the paths whose change replaces an instance ("#0" is the
// first element of a list block): tofu compares prior and planned values at each.
type resource struct {
	attrs   []attr
	blocks  []block
	replace [][]string
}

var (
	str     = tftypes.String
	boolean = tftypes.Bool
	num     = tftypes.Number
	dyn     = tftypes.DynamicPseudoType
	strMap  = tftypes.Map{ElementType: tftypes.String}
	strList = tftypes.List{ElementType: tftypes.String}
)

// kubernetes_manifest: the object is identified by apiVersion, kind, name and namespace; a change
// of any replaces it, every other change of the manifest is applied in place (server-side apply).
var manifest = resource{
	attrs: []attr{
		{name: "manifest", typ: dyn, mode: "req"},
		{name: "object", typ: dyn, mode: "optcomp"},
		{name: "computed_fields", typ: strList, mode: "opt"},
		{name: "wait_for", typ: tftypes.Object{AttributeTypes: map[string]tftypes.Type{"fields": strMap}}, mode: "opt"},
	},
	blocks: []block{
		{name: "wait", max: 1, attrs: []attr{{name: "rollout", typ: boolean, mode: "opt"}, {name: "fields", typ: strMap, mode: "opt"}},
			blocks: []block{{name: "condition", attrs: []attr{{name: "type", typ: str, mode: "opt"}, {name: "status", typ: str, mode: "opt"}}}}},
		{name: "field_manager", max: 1, attrs: []attr{{name: "name", typ: str, mode: "opt"}, {name: "force_conflicts", typ: boolean, mode: "opt"}}},
		{name: "timeouts", max: 1, attrs: []attr{{name: "create", typ: str, mode: "opt"}, {name: "update", typ: str, mode: "opt"}, {name: "delete", typ: str, mode: "opt"}}},
	},
	replace: [][]string{
		{"manifest", "apiVersion"}, {"manifest", "kind"},
		{"manifest", "metadata", "name"}, {"manifest", "metadata", "namespace"},
	},
}

var objectMeta = block{name: "metadata", max: 1, attrs: []attr{
	{name: "name", typ: str, mode: "optcomp"}, {name: "namespace", typ: str, mode: "opt"},
	{name: "generate_name", typ: str, mode: "opt"}, {name: "labels", typ: strMap, mode: "opt"},
	{name: "annotations", typ: strMap, mode: "opt"}, {name: "generation", typ: num, mode: "comp"},
	{name: "resource_version", typ: str, mode: "comp"}, {name: "uid", typ: str, mode: "comp"},
}}

// kubernetes_secret (and its _v1 alias): name, namespace and type replace; data updates in place.
var secret = resource{
	attrs: []attr{
		{name: "id", typ: str, mode: "comp"},
		{name: "data", typ: strMap, mode: "opt", sensitive: true},
		{name: "binary_data", typ: strMap, mode: "opt", sensitive: true},
		{name: "immutable", typ: boolean, mode: "opt"},
		{name: "type", typ: str, mode: "opt"},
		{name: "wait_for_service_account_token", typ: boolean, mode: "opt"},
	},
	blocks:  []block{objectMeta, {name: "timeouts", single: true, attrs: []attr{{name: "create", typ: str, mode: "opt"}}}},
	replace: [][]string{{"metadata", "#0", "name"}, {"metadata", "#0", "namespace"}, {"type"}},
}

// Deckhouse's kubernetes_resource_ready_v1: waits until the named object is ready.
var resourceReady = resource{
	attrs: []attr{
		{name: "id", typ: str, mode: "comp"}, {name: "api_version", typ: str, mode: "req"},
		{name: "kind", typ: str, mode: "req"}, {name: "name", typ: str, mode: "req"},
		{name: "namespace", typ: str, mode: "opt"}, {name: "wait_timeout", typ: str, mode: "opt"},
		{name: "skip_check_on_create_with_resource_lifetime", typ: str, mode: "opt"},
		{name: "fields", typ: strMap, mode: "opt"}, {name: "triggers", typ: strMap, mode: "opt"},
		{name: "fail_conditions_appearance_duration", typ: str, mode: "opt"},
	},
	blocks: []block{{name: "fail_condition", attrs: []attr{
		{name: "type", typ: str, mode: "opt"}, {name: "status", typ: str, mode: "opt"}, {name: "reason", typ: str, mode: "opt"},
	}}},
	replace: [][]string{{"api_version"}, {"kind"}, {"name"}, {"namespace"}},
}

// Deckhouse's kubernetes_owner_references_v1: patches ownerReferences onto the named object.
var ownerReferences = resource{
	attrs: []attr{
		{name: "id", typ: str, mode: "comp"}, {name: "api_version", typ: str, mode: "req"},
		{name: "kind", typ: str, mode: "req"},
	},
	blocks: []block{
		{name: "metadata", max: 1, attrs: []attr{{name: "name", typ: str, mode: "req"}, {name: "namespace", typ: str, mode: "opt"}}},
		{name: "owner_references", attrs: []attr{
			{name: "api_version", typ: str, mode: "req"}, {name: "kind", typ: str, mode: "req"},
			{name: "name", typ: str, mode: "req"}, {name: "uid", typ: str, mode: "req"},
			{name: "block_owner_deletion", typ: boolean, mode: "opt"}, {name: "controller", typ: boolean, mode: "opt"},
		}},
	},
	replace: [][]string{{"api_version"}, {"kind"}, {"metadata"}},
}

// The types the stand-in serves: hashicorp/kubernetes's, plus Deckhouse's own unless
// $STRATUS_KUBERNETES_STOCK is set (then it lacks them, as the stock provider does).
func resources() map[string]resource {
	out := map[string]resource{
		"kubernetes_manifest":  manifest,
		"kubernetes_secret":    secret,
		"kubernetes_secret_v1": secret,
	}
	if os.Getenv("STRATUS_KUBERNETES_STOCK") == "" {
		out["kubernetes_resource_ready_v1"] = resourceReady
		out["kubernetes_owner_references_v1"] = ownerReferences
	}
	return out
}

// The provider's own arguments (the connection); all optional.
var providerBlock = block{
	attrs: []attr{
		{name: "host", typ: str, mode: "opt"}, {name: "username", typ: str, mode: "opt"},
		{name: "password", typ: str, mode: "opt", sensitive: true}, {name: "insecure", typ: boolean, mode: "opt"},
		{name: "tls_server_name", typ: str, mode: "opt"}, {name: "client_certificate", typ: str, mode: "opt"},
		{name: "client_key", typ: str, mode: "opt", sensitive: true}, {name: "cluster_ca_certificate", typ: str, mode: "opt"},
		{name: "config_paths", typ: strList, mode: "opt"}, {name: "config_path", typ: str, mode: "opt"},
		{name: "config_context", typ: str, mode: "opt"}, {name: "config_context_auth_info", typ: str, mode: "opt"},
		{name: "config_context_cluster", typ: str, mode: "opt"}, {name: "token", typ: str, mode: "opt", sensitive: true},
		{name: "proxy_url", typ: str, mode: "opt"}, {name: "ignore_annotations", typ: strList, mode: "opt"},
		{name: "ignore_labels", typ: strList, mode: "opt"},
	},
	blocks: []block{
		{name: "exec", max: 1, attrs: []attr{
			{name: "api_version", typ: str, mode: "req"}, {name: "command", typ: str, mode: "req"},
			{name: "env", typ: strMap, mode: "opt"}, {name: "args", typ: strList, mode: "opt"},
		}},
		{name: "experiments", max: 1, attrs: []attr{{name: "manifest_resource", typ: boolean, mode: "opt"}}},
	},
}

func (b block) schema() *tfprotov5.SchemaBlock {
	out := &tfprotov5.SchemaBlock{}
	for _, a := range b.attrs {
		out.Attributes = append(out.Attributes, &tfprotov5.SchemaAttribute{
			Name: a.name, Type: a.typ, Sensitive: a.sensitive,
			Required: a.mode == "req",
			Optional: a.mode == "opt" || a.mode == "optcomp",
			Computed: a.mode == "comp" || a.mode == "optcomp",
		})
	}
	for _, n := range b.blocks {
		nested := &tfprotov5.SchemaNestedBlock{TypeName: n.name, Block: n.schema()}
		if n.single {
			nested.Nesting = tfprotov5.SchemaNestedBlockNestingModeSingle
		} else {
			nested.Nesting = tfprotov5.SchemaNestedBlockNestingModeList
			nested.MaxItems = n.max
		}
		out.BlockTypes = append(out.BlockTypes, nested)
	}
	return out
}

// The value type of a block: an object of its attributes, each nested block a list of objects
// (or one object when single).
func (b block) objectType() tftypes.Object {
	types := map[string]tftypes.Type{}
	for _, a := range b.attrs {
		types[a.name] = a.typ
	}
	for _, n := range b.blocks {
		if n.single {
			types[n.name] = n.objectType()
		} else {
			types[n.name] = tftypes.List{ElementType: n.objectType()}
		}
	}
	return tftypes.Object{AttributeTypes: types}
}

func (r resource) block() block { return block{attrs: r.attrs, blocks: r.blocks} }
