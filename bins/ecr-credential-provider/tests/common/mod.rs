//! Shared by the integration tests: runs the shipped `ecr-credential-provider` binary with a
//! request on stdin against moto (through the counting proxy of `stratus_testenv::AwsEnv`),
//! with a clean environment and a private cache directory per test.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use stratus_testenv::AwsEnv;

pub const V1: &str = "credentialprovider.kubelet.k8s.io/v1";
pub const V1BETA1: &str = "credentialprovider.kubelet.k8s.io/v1beta1";
pub const V1ALPHA1: &str = "credentialprovider.kubelet.k8s.io/v1alpha1";
pub const ROLE_ANNOTATION: &str = "eks.amazonaws.com/ecr-role-arn";
/// moto's default account: the password of a token asked with the node's credentials.
pub const NODE_PASSWORD: &str = "123456789012-auth-token";
pub const IMAGE: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com/team/app:v1";
pub const HOST: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com";
pub const TWELVE_HOURS: Duration = Duration::from_secs(12 * 3600);

/// What one invocation did.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// The response, asserting success.
    pub fn response(&self) -> serde_json::Value {
        assert_eq!(self.code, Some(0), "failed: {self:#?}");
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("stdout: {e}: {self:#?}"))
    }

    /// `(username, password)` for `host`.
    pub fn auth(&self, host: &str) -> (String, String) {
        let response = self.response();
        let auth = &response["auth"][host];
        assert!(auth.is_object(), "no auth for {host}: {response}");
        (
            auth["username"].as_str().unwrap().to_owned(),
            auth["password"].as_str().unwrap().to_owned(),
        )
    }

    /// The `cacheDuration`, in seconds.
    pub fn cache_seconds(&self) -> u64 {
        parse_go_duration(self.response()["cacheDuration"].as_str().unwrap())
    }

    /// Asserts a failure: non-zero exit, nothing on stdout, `needle` on stderr.
    pub fn assert_failed_with(&self, needle: &str) {
        assert_ne!(self.code, Some(0), "succeeded: {self:#?}");
        assert!(self.stdout.is_empty(), "stdout not empty: {self:#?}");
        assert!(
            self.stderr.contains(needle),
            "{needle:?} not on stderr: {self:#?}"
        );
    }
}

/// `"5h59m30s"` → seconds (h/m/s parts only, as the plugin writes them).
pub fn parse_go_duration(s: &str) -> u64 {
    let (mut total, mut number) = (0, 0);
    for c in s.chars() {
        match c {
            '0'..='9' => number = number * 10 + u64::from(c.to_digit(10).unwrap()),
            'h' => (total, number) = (total + number * 3600, 0),
            'm' => (total, number) = (total + number * 60, 0),
            's' => (total, number) = (total + number, 0),
            _ => panic!("unexpected {c:?} in duration {s:?}"),
        }
    }
    total
}

/// A request as the kubelet writes it.
pub fn request(
    api_version: &str,
    image: &str,
    token: Option<&str>,
    annotations: &[(&str, &str)],
) -> Vec<u8> {
    let mut request = serde_json::json!({
        "apiVersion": api_version,
        "kind": "CredentialProviderRequest",
        "image": image,
    });
    if let Some(token) = token {
        request["serviceAccountToken"] = token.into();
    }
    if !annotations.is_empty() {
        let map: BTreeMap<&str, &str> = annotations.iter().copied().collect();
        request["serviceAccountAnnotations"] = serde_json::json!(map);
    }
    request.to_string().into_bytes()
}

/// A service-account token as the kubelet would pass it (unsigned: moto does not check).
pub fn sa_token(namespace: &str, name: &str) -> String {
    use base64::Engine as _;
    let b64 = |v: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
    let claims = serde_json::json!({
        "iss": "https://kubernetes.default.svc",
        "sub": format!("system:serviceaccount:{namespace}:{name}"),
        "aud": ["sts.amazonaws.com"],
        "exp": 4_102_444_800u64,
        "kubernetes.io": {"namespace": namespace, "serviceaccount": {"name": name, "uid": format!("uid-{name}")}},
    });
    format!(
        "{}.{}.{}",
        b64(br#"{"alg":"RS256","kid":"test"}"#),
        b64(claims.to_string().as_bytes()),
        b64(format!("signature-of-{namespace}-{name}-0123456789").as_bytes())
    )
}

/// One test's world: moto, a cache directory, and the plugin's environment.
pub struct World {
    pub aws: AwsEnv,
    pub cache_dir: PathBuf,
    pub env: Vec<(String, String)>,
}

impl World {
    /// moto with ECR tokens that live `lifetime` (`None`: moto's already expired ones).
    pub async fn start(lifetime: Option<Duration>) -> World {
        let aws = AwsEnv::start().await.expect("moto");
        aws.set_ecr_token_lifetime(lifetime)
            .await
            .expect("token lifetime");
        let cache_dir = aws.dir().join("cache");
        let mut env = aws.env_vars();
        env.extend(
            [
                ("AWS_CONFIG_FILE", "/dev/null"),
                ("AWS_SHARED_CREDENTIALS_FILE", "/dev/null"),
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned())),
        );
        World {
            aws,
            cache_dir,
            env,
        }
    }

    /// Runs the plugin with `--cache-dir` set to this world's directory.
    pub fn run(&self, stdin: &[u8], extra_args: &[&str]) -> Run {
        let mut args = vec![format!("--cache-dir={}", self.cache_dir.display())];
        args.extend(extra_args.iter().map(|a| a.to_string()));
        run_plugin(&self.env, &args, stdin)
    }

    /// Like [`World::run`] with extra environment variables.
    pub fn run_with_env(&self, stdin: &[u8], extra_args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut all = self.env.clone();
        all.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let mut args = vec![format!("--cache-dir={}", self.cache_dir.display())];
        args.extend(extra_args.iter().map(|a| a.to_string()));
        run_plugin(&all, &args, stdin)
    }

    /// All requests the proxy saw.
    pub async fn aws_requests(&self) -> BTreeMap<String, u64> {
        self.aws.aws_request_counts().await.expect("counts")
    }

    /// Requests for `action` of any service (unsigned STS calls count as `unknown:`).
    pub async fn count(&self, action: &str) -> u64 {
        self.aws_requests()
            .await
            .iter()
            .filter(|(k, _)| k.ends_with(&format!(":{action}")))
            .map(|(_, v)| v)
            .sum()
    }

    pub async fn total(&self) -> u64 {
        self.aws.aws_request_total().await.expect("total")
    }

    pub async fn reset(&self) {
        self.aws.reset_aws_request_counts().await.expect("reset");
    }

    /// The cache files (not temporary ones).
    pub fn cache_files(&self) -> Vec<PathBuf> {
        cache_files(&self.cache_dir)
    }
}

pub fn cache_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
    files.sort();
    files
}

pub fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_ecr-credential-provider"))
}

/// Runs the plugin with exactly `env` (nothing inherited), `args` and `stdin`.
pub fn run_plugin(env: &[(String, String)], args: &[String], stdin: &[u8]) -> Run {
    let mut child = Command::new(binary())
        .args(args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ecr-credential-provider");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin)
        .expect("write stdin");
    let out = child.wait_with_output().expect("wait");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8(out.stdout).expect("utf-8 stdout"),
        stderr: String::from_utf8(out.stderr).expect("utf-8 stderr"),
    }
}
