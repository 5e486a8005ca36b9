//! One invocation, I/O at the edges: decode the request, find the registry and the identity,
//! answer from the cache when it is fresh, else fetch a token (falling back to a stale cached
//! one if AWS fails) and store it.

use crate::aws::FetchError;
use crate::cache::{Cache, CacheKey, Entry, Lookup};
use crate::duration::{cache_seconds, go_duration};
use crate::identity::{self, Identity, RoleArnError};
use crate::log::Log;
use crate::registry::{self, Registry, RegistryError};
use crate::request::{self, RequestError};
use crate::response::{AuthConfig, Response};
use crate::secret::Secret;

/// Registry credentials as ECR hands them out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// The registry user name (`AWS` for ECR).
    pub username: String,
    /// The registry password (the decoded token's second half).
    pub password: Secret,
    /// Unix seconds; `None` if AWS gave no expiry.
    pub expires_at: Option<i64>,
}

/// Where tokens come from (AWS in the binary, a fake in tests).
pub trait TokenSource {
    /// A token for `registry`, asked as `identity`. Registers every secret it handles with
    /// `log`.
    fn fetch(
        &self,
        registry: &Registry,
        identity: &Identity,
        log: &mut Log,
    ) -> Result<Token, FetchError>;
}

/// Settings of one invocation.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The on-disk cache; `None` with `--no-cache`.
    pub cache: Option<Cache>,
    /// `AWS_ECR_ROLE_ARN`.
    pub env_role: Option<String>,
}

/// Why the invocation fails.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request on stdin is unusable.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// The image is not in an ECR registry.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// The role to assume is not an IAM role ARN.
    #[error(transparent)]
    Role(#[from] RoleArnError),
    /// AWS gave no token for the registry.
    #[error("no credentials for {registry}: {source}")]
    Fetch {
        /// The registry (the response's auth key).
        registry: String,
        /// Why not.
        #[source]
        source: FetchError,
    },
}

impl Error {
    /// Short category for messages and metrics.
    pub fn category(&self) -> &'static str {
        match self {
            Error::Request(e) => e.category(),
            Error::Registry(_) => "UnsupportedImage",
            Error::Role(_) => "BadRoleArn",
            Error::Fetch { source, .. } => source.category(),
        }
    }
}

/// Answers one request read from stdin, at `now` (Unix seconds).
pub fn run(
    input: &[u8],
    options: &Options,
    now: i64,
    source: &dyn TokenSource,
    log: &mut Log,
) -> Result<Response, Error> {
    let request = request::parse(input)?;
    if let Some(token) = &request.service_account_token {
        log.add_secret(token);
    }
    let registry = registry::parse_image(&request.image)?;
    let identity = identity::choose(&request, options.env_role.as_deref())?;
    log.info(
        2,
        format!(
            "image {} is in {registry}{}",
            request.image,
            match &identity {
                Identity::Node => String::new(),
                Identity::WebIdentity { role_arn, .. } => format!(", role {role_arn}"),
            }
        ),
    );
    let respond = |username: String, password: Secret, expires_at: Option<i64>| Response {
        api_version: request.api_version,
        cache_seconds: cache_seconds(expires_at, now),
        registry: registry.authority().to_owned(),
        auth: AuthConfig { username, password },
    };

    let key = CacheKey {
        registry: registry.authority().to_owned(),
        region: registry.region().to_owned(),
        role: identity.role().to_owned(),
        service_account: identity.service_account().to_owned(),
    };
    let mut stale = None;
    if let Some(cache) = &options.cache {
        match cache.lookup(&key, now) {
            Lookup::Fresh(entry) => {
                log.add_secret(&entry.password);
                log.info(
                    2,
                    format!(
                        "cache hit {} (token expires in {})",
                        cache.path(&key).display(),
                        go_duration((entry.expires_at - now) as u64)
                    ),
                );
                return Ok(respond(
                    entry.username,
                    entry.password,
                    Some(entry.expires_at),
                ));
            }
            Lookup::Stale(entry) => {
                log.add_secret(&entry.password);
                log.info(2, "cache entry past half its lifetime: refreshing");
                stale = Some(entry);
            }
            Lookup::Miss(reason) => log.info(2, format!("cache miss: {reason}")),
        }
    }

    let token = match source.fetch(&registry, &identity, log) {
        Ok(token) => token,
        Err(err) => {
            return match stale {
                Some(entry) => {
                    log.warn(format!(
                        "{err}; answering with the cached token, which expires in {}",
                        go_duration((entry.expires_at - now) as u64)
                    ));
                    Ok(respond(
                        entry.username,
                        entry.password,
                        Some(entry.expires_at),
                    ))
                }
                None => Err(Error::Fetch {
                    registry: registry.to_string(),
                    source: err,
                }),
            }
        }
    };
    match token.expires_at {
        Some(expires_at) if expires_at > now => {
            log.info(
                2,
                format!(
                    "got a token that expires in {}",
                    go_duration((expires_at - now) as u64)
                ),
            );
            if let Some(cache) = &options.cache {
                let entry = Entry {
                    username: token.username.clone(),
                    password: token.password.clone(),
                    issued_at: now,
                    expires_at,
                };
                match cache.store(&key, &entry) {
                    Ok(()) => log.info(2, format!("cached in {}", cache.path(&key).display())),
                    Err(err) => log.warn(format!(
                        "could not write the cache entry {}: {err}",
                        cache.path(&key).display()
                    )),
                }
            }
        }
        Some(_) => log.info(
            2,
            "got a token that has already expired: cacheDuration 0, not cached",
        ),
        None => log.info(2, "got a token without expiry: cacheDuration 0, not cached"),
    }
    Ok(respond(token.username, token.password, token.expires_at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    const NOW: i64 = 1_800_000_000;
    const IMAGE: &str = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/app:v1";

    /// A token source that counts calls and answers from a script.
    struct Fake {
        calls: RefCell<Vec<(String, String)>>,
        answer: RefCell<Result<Token, String>>,
    }

    impl Fake {
        fn new(lifetime: Option<i64>) -> Fake {
            Fake {
                calls: RefCell::new(Vec::new()),
                answer: RefCell::new(Ok(Token {
                    username: "AWS".into(),
                    password: Secret::new("fresh-password-1"),
                    expires_at: lifetime.map(|l| NOW + l),
                })),
            }
        }
        fn fail(&self) {
            *self.answer.borrow_mut() = Err("connection refused".into());
        }
        fn calls(&self) -> usize {
            self.calls.borrow().len()
        }
    }

    impl TokenSource for Fake {
        fn fetch(
            &self,
            registry: &Registry,
            identity: &Identity,
            log: &mut Log,
        ) -> Result<Token, FetchError> {
            self.calls
                .borrow_mut()
                .push((registry.region().to_owned(), identity.role().to_owned()));
            match &*self.answer.borrow() {
                Ok(token) => {
                    log.add_secret(&token.password);
                    Ok(token.clone())
                }
                Err(message) => Err(FetchError::GetToken {
                    service: registry.service(),
                    region: registry.region().into(),
                    message: message.clone(),
                }),
            }
        }
    }

    use crate::log::Buf;

    fn input(image: &str, token: Option<&str>, role: Option<&str>) -> Vec<u8> {
        let mut request = serde_json::json!({
            "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
            "kind": "CredentialProviderRequest",
            "image": image,
        });
        if let Some(token) = token {
            request["serviceAccountToken"] = token.into();
        }
        if let Some(role) = role {
            request["serviceAccountAnnotations"] =
                serde_json::json!({ identity::ROLE_ANNOTATION: role });
        }
        request.to_string().into_bytes()
    }

    fn tempdir(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!(
            "ecr-app-test-{}-{name}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ))
    }

    fn options(dir: &std::path::Path) -> Options {
        Options {
            cache: Some(Cache::new(dir)),
            env_role: None,
        }
    }

    fn run_at(
        now: i64,
        input: &[u8],
        options: &Options,
        source: &Fake,
    ) -> (Result<Response, Error>, String) {
        let buf = Buf::default();
        let mut log = Log::new(4, Box::new(buf.clone()));
        let result = run(input, options, now, source, &mut log);
        if let Err(err) = &result {
            log.error(err.to_string());
        }
        (result, buf.text())
    }

    #[test]
    fn miss_then_hit_without_a_fetch() {
        let dir = tempdir("hit");
        let source = Fake::new(Some(12 * 3600));
        let opts = options(&dir);
        let (first, _) = run_at(NOW, &input(IMAGE, None, None), &opts, &source);
        let first = first.unwrap();
        assert_eq!(first.cache_seconds, 6 * 3600);
        assert_eq!(
            first.registry,
            "123456789012.dkr.ecr.eu-west-1.amazonaws.com"
        );
        assert_eq!(source.calls(), 1);
        // Another image of the same registry, an hour later: from the cache.
        let (second, log) = run_at(
            NOW + 3600,
            &input(
                "123456789012.dkr.ecr.eu-west-1.amazonaws.com/other@sha256:00",
                None,
                None,
            ),
            &opts,
            &source,
        );
        let second = second.unwrap();
        assert_eq!(source.calls(), 1, "{log}");
        assert_eq!(second.auth.password.expose(), "fresh-password-1");
        assert_eq!(second.cache_seconds, 11 * 3600 / 2);
        assert!(log.contains("cache hit"), "{log}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn stale_entries_are_refreshed_and_serve_when_aws_fails() {
        let dir = tempdir("stale");
        let source = Fake::new(Some(1000));
        let opts = options(&dir);
        run_at(NOW, &input(IMAGE, None, None), &opts, &source)
            .0
            .unwrap();
        // Past half the lifetime: refreshed.
        let (r, _) = run_at(NOW + 600, &input(IMAGE, None, None), &opts, &source);
        r.unwrap();
        assert_eq!(source.calls(), 2);
        // The refreshed entry was issued at NOW + 600 (expiry NOW + 1000): stale from NOW + 800.
        source.fail();
        let (r, log) = run_at(NOW + 900, &input(IMAGE, None, None), &opts, &source);
        let r = r.unwrap();
        assert_eq!(source.calls(), 3);
        assert_eq!(r.cache_seconds, 50);
        assert!(log.contains("warning: ecr:GetAuthorizationToken in eu-west-1 failed: connection refused; answering with the cached token, which expires in 1m40s"), "{log}");
        // Expired: the failure is the answer.
        let (r, log) = run_at(NOW + 1000, &input(IMAGE, None, None), &opts, &source);
        let err = r.unwrap_err();
        assert_eq!(err.category(), "GetTokenFailed");
        assert!(log.contains("error: no credentials for 123456789012.dkr.ecr.eu-west-1.amazonaws.com (ecr, eu-west-1): ecr:GetAuthorizationToken in eu-west-1 failed: connection refused"), "{log}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn expired_or_expiry_less_tokens_are_answered_but_not_cached() {
        for lifetime in [Some(-10), Some(0), None] {
            let dir = tempdir("expired");
            let source = Fake::new(lifetime);
            let opts = options(&dir);
            for n in 1..=2 {
                let (r, _) = run_at(NOW, &input(IMAGE, None, None), &opts, &source);
                assert_eq!(r.unwrap().cache_seconds, 0);
                assert_eq!(source.calls(), n, "{lifetime:?}");
            }
            assert!(!dir.exists() || std::fs::read_dir(&dir).unwrap().next().is_none());
            let _ = std::fs::remove_dir_all(&dir);
        }
    }

    #[test]
    fn roles_and_service_accounts_get_their_own_entries() {
        let dir = tempdir("roles");
        let source = Fake::new(Some(3600));
        let opts = options(&dir);
        let role = "arn:aws:iam::111122223333:role/pull";
        let b64 = |s: &str| {
            use base64::Engine as _;
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s)
        };
        let sa = |name: &str| {
            format!(
                "h.{}.s",
                b64(&format!(r#"{{"sub":"system:serviceaccount:ns:{name}"}}"#))
            )
        };
        let requests = [
            input(IMAGE, None, None),
            input(IMAGE, Some(&sa("a")), Some(role)),
            input(IMAGE, Some(&sa("b")), Some(role)),
            input(
                IMAGE,
                Some(&sa("a")),
                Some("arn:aws:iam::111122223333:role/other"),
            ),
        ];
        for (n, request) in requests.iter().enumerate() {
            run_at(NOW, request, &opts, &source).0.unwrap();
            assert_eq!(source.calls(), n + 1);
        }
        // All four are cached now; a new token of service account "a" hits.
        for request in &requests {
            run_at(NOW + 1, request, &opts, &source).0.unwrap();
        }
        assert_eq!(source.calls(), 4);
        assert_eq!(
            source.calls.borrow()[1],
            ("eu-west-1".to_owned(), role.to_owned())
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn without_a_cache_every_call_fetches() {
        let source = Fake::new(Some(3600));
        let opts = Options::default();
        for n in 1..=2 {
            run_at(NOW, &input(IMAGE, None, None), &opts, &source)
                .0
                .unwrap();
            assert_eq!(source.calls(), n);
        }
    }

    #[test]
    fn bad_input_never_reaches_the_source() {
        let source = Fake::new(Some(3600));
        let opts = Options::default();
        for (input, category) in [
            (b"{}".to_vec(), "BadRequest"),
            (
                input("docker.io/library/nginx", None, None),
                "UnsupportedImage",
            ),
            (
                input(IMAGE, Some("tok.en.x"), Some("not-an-arn")),
                "BadRoleArn",
            ),
        ] {
            let (r, _) = run_at(NOW, &input, &opts, &source);
            assert_eq!(r.unwrap_err().category(), category);
        }
        assert_eq!(source.calls(), 0);
    }

    #[test]
    fn secrets_never_reach_the_log() {
        let dir = tempdir("secrets");
        let source = Fake::new(Some(3600));
        let opts = options(&dir);
        let token = "h.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6bnM6YSJ9.very-secret-signature";
        let request = input(
            IMAGE,
            Some(token),
            Some("arn:aws:iam::111122223333:role/pull"),
        );
        let (_, log1) = run_at(NOW, &request, &opts, &source);
        let (_, log2) = run_at(NOW + 1, &request, &opts, &source);
        source.fail();
        let (_, log3) = run_at(NOW + 3000, &request, &opts, &source);
        let all = format!("{log1}{log2}{log3}");
        assert!(all.contains("cache hit"), "{all}");
        assert!(all.contains("answering with the cached token"), "{all}");
        for secret in [token, "very-secret-signature", "fresh-password-1"] {
            assert!(!all.contains(secret), "{secret} in {all}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
