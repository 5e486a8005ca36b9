//! One OpenTofu module read with a maintained HCL parser (`hcl-rs`): its variables, outputs,
//! resources, module calls and `terraform` block. Nothing is evaluated here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use hcl::{Block, Body, Expression, ObjectKey};

/// Why a module could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ModuleError {
    #[error("reading {path}: {source}")]
    /// A file could not be read.
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    #[error("parsing {path}: {message}")]
    /// A file is not valid HCL.
    Parse {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        message: String,
    },
}

/// A `variable` block.
#[derive(Debug, Clone)]
pub struct Variable {
    /// The variable's name.
    pub name: String,
    /// Its `type` expression.
    pub type_expr: Option<Expression>,
    /// Its description.
    pub description: Option<String>,
    /// Its validation blocks.
    pub validations: Vec<Validation>,
    /// Whether it has a default (is optional).
    pub has_default: bool,
}

/// A `validation` block of a variable.
#[derive(Debug, Clone)]
pub struct Validation {
    /// The condition, as written.
    pub condition: String,
    /// The message shown when it fails.
    pub error_message: Option<String>,
}

/// An `output` block.
#[derive(Debug, Clone)]
pub struct Output {
    /// The output's name.
    pub name: String,
    /// Its description.
    pub description: Option<String>,
}

/// A `resource` or `data` block.
#[derive(Debug, Clone)]
pub struct Resource {
    /// `true` for `data` blocks.
    pub data: bool,
    /// The resource type (`openstack_compute_instance_v2`…).
    pub resource_type: String,
    /// The resource's name.
    pub name: String,
    /// Its body.
    pub body: Body,
}

impl Resource {
    /// The expression of attribute `key`, formatted as HCL.
    pub fn attr(&self, key: &str) -> Option<String> {
        attr_expr(&self.body, key).map(|e| e.to_string())
    }
}

/// A `module` block.
#[derive(Debug, Clone)]
pub struct ModuleCall {
    /// The module call's name.
    pub name: String,
    /// Its `source`.
    pub source: Option<String>,
    /// Every other argument, formatted as HCL.
    pub args: BTreeMap<String, String>,
}

/// One entry of `required_providers`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderRequirement {
    /// The provider's `source`.
    pub source: Option<String>,
    /// Its version constraint.
    pub version: Option<String>,
}

/// A parsed module directory.
#[derive(Debug, Clone)]
pub struct Module {
    /// The module's directory.
    pub dir: PathBuf,
    /// The `.tf` files read, sorted.
    pub files: Vec<PathBuf>,
    /// Its variables.
    pub variables: Vec<Variable>,
    /// Its outputs.
    pub outputs: Vec<Output>,
    /// Its resources.
    pub resources: Vec<Resource>,
    /// Its module calls.
    pub module_calls: Vec<ModuleCall>,
    /// `terraform { required_version }`.
    pub required_version: Option<String>,
    /// `terraform { required_providers }` by local name.
    pub required_providers: BTreeMap<String, ProviderRequirement>,
    /// Names of the `provider` blocks.
    pub provider_blocks: Vec<String>,
}

impl Module {
    /// Reads every `.tf` file of `dir` (symlinks followed).
    pub fn load(dir: &Path) -> Result<Module, ModuleError> {
        let read_err = |source| ModuleError::Read {
            path: dir.to_path_buf(),
            source,
        };
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(read_err)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "tf"))
            .collect();
        files.sort();
        let mut module = Module {
            dir: dir.to_path_buf(),
            files: files.clone(),
            variables: Vec::new(),
            outputs: Vec::new(),
            resources: Vec::new(),
            module_calls: Vec::new(),
            required_version: None,
            required_providers: BTreeMap::new(),
            provider_blocks: Vec::new(),
        };
        for file in &files {
            let text = std::fs::read_to_string(file).map_err(|source| ModuleError::Read {
                path: file.clone(),
                source,
            })?;
            let body = hcl::parse(&text).map_err(|e| ModuleError::Parse {
                path: file.clone(),
                message: e.to_string(),
            })?;
            module.add(&body);
        }
        Ok(module)
    }

    fn add(&mut self, body: &Body) {
        for block in body.blocks() {
            let labels: Vec<String> = block
                .labels
                .iter()
                .map(|l| l.as_str().to_string())
                .collect();
            match (block.identifier.as_str(), labels.as_slice()) {
                ("variable", [name]) => self.variables.push(variable(name, block)),
                ("output", [name]) => self.outputs.push(Output {
                    name: name.clone(),
                    description: string_attr(&block.body, "description"),
                }),
                ("resource" | "data", [rtype, name]) => self.resources.push(Resource {
                    data: block.identifier.as_str() == "data",
                    resource_type: rtype.clone(),
                    name: name.clone(),
                    body: block.body.clone(),
                }),
                ("module", [name]) => self.module_calls.push(ModuleCall {
                    name: name.clone(),
                    source: string_attr(&block.body, "source"),
                    args: block
                        .body
                        .attributes()
                        .filter(|a| a.key.as_str() != "source")
                        .map(|a| (a.key.as_str().to_string(), a.expr.to_string()))
                        .collect(),
                }),
                ("provider", [name]) => self.provider_blocks.push(name.clone()),
                ("terraform", []) => self.add_terraform(&block.body),
                _ => {}
            }
        }
    }

    fn add_terraform(&mut self, body: &Body) {
        if let Some(v) = string_attr(body, "required_version") {
            self.required_version = Some(v);
        }
        for block in body
            .blocks()
            .filter(|b| b.identifier.as_str() == "required_providers")
        {
            for attr in block.body.attributes() {
                let mut req = ProviderRequirement {
                    source: None,
                    version: None,
                };
                if let Expression::Object(object) = &attr.expr {
                    for (key, value) in object.iter() {
                        let text = match value {
                            Expression::String(s) => s.clone(),
                            other => other.to_string(),
                        };
                        match object_key(key).as_str() {
                            "source" => req.source = Some(text),
                            "version" => req.version = Some(text),
                            _ => {}
                        }
                    }
                }
                self.required_providers
                    .insert(attr.key.as_str().to_string(), req);
            }
        }
    }

    /// The variable named `name`.
    pub fn variable(&self, name: &str) -> Option<&Variable> {
        self.variables.iter().find(|v| v.name == name)
    }

    /// The output named `name`.
    pub fn output(&self, name: &str) -> Option<&Output> {
        self.outputs.iter().find(|o| o.name == name)
    }

    /// Managed resources of `resource_type`.
    pub fn resources_of(&self, resource_type: &str) -> Vec<&Resource> {
        self.resources
            .iter()
            .filter(|r| !r.data && r.resource_type == resource_type)
            .collect()
    }

    /// The module call named `name`.
    pub fn module_call(&self, name: &str) -> Option<&ModuleCall> {
        self.module_calls.iter().find(|m| m.name == name)
    }

    /// The text of every file, for name-level searches.
    pub fn texts(&self) -> Vec<(PathBuf, String)> {
        self.files
            .iter()
            .filter_map(|f| std::fs::read_to_string(f).ok().map(|t| (f.clone(), t)))
            .collect()
    }
}

fn variable(name: &str, block: &Block) -> Variable {
    Variable {
        name: name.to_string(),
        type_expr: attr_expr(&block.body, "type").cloned(),
        description: string_attr(&block.body, "description"),
        has_default: attr_expr(&block.body, "default").is_some(),
        validations: block
            .body
            .blocks()
            .filter(|b| b.identifier.as_str() == "validation")
            .map(|b| Validation {
                condition: attr_expr(&b.body, "condition")
                    .map(|e| e.to_string())
                    .unwrap_or_default(),
                error_message: string_attr(&b.body, "error_message"),
            })
            .collect(),
    }
}

/// The expression of attribute `key` of `body`.
pub fn attr_expr<'a>(body: &'a Body, key: &str) -> Option<&'a Expression> {
    body.attributes()
        .find(|a| a.key.as_str() == key)
        .map(|a| &a.expr)
}

/// Attribute `key` when it is a plain string.
pub fn string_attr(body: &Body, key: &str) -> Option<String> {
    match attr_expr(body, key)? {
        Expression::String(s) => Some(s.clone()),
        _ => None,
    }
}

/// An object key as text (identifier or quoted string).
pub fn object_key(key: &ObjectKey) -> String {
    match key {
        ObjectKey::Identifier(id) => id.as_str().to_string(),
        ObjectKey::Expression(Expression::String(s)) => s.clone(),
        other => other.to_string(),
    }
}

/// The nested blocks of `body` named `identifier`.
pub fn blocks<'a>(body: &'a Body, identifier: &'a str) -> impl Iterator<Item = &'a Block> + 'a {
    body.blocks()
        .filter(move |b| b.identifier.as_str() == identifier)
}
