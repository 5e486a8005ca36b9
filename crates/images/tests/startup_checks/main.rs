//! Every shipped binary started the ways a user gets wrong, black-box: no echo, no half start.
//!
//! The debug builds next to this test are run (`cargo build --workspace --bins` first, as
//! `make test` does).
//!
//! 1. Junk holding a recognisable secret in each config file a flag names (and in each variable
//!    that carries a credential): the process exits non-zero, names the flag or file, never
//!    prints the secret (nor a piece of the base64 it was hidden in) and says less than 4 KiB.
//! 2. Each binary and mode started with its required settings missing: it exits non-zero within
//!    seconds, naming every missing setting in the one error, and serves nothing (it never says
//!    "serving", never touches the port the test holds for it, creates no CSI socket).
//!
//! The binaries run with an empty environment and a fresh `$HOME`; every address they could ask
//! (instance metadata, the OpenStack metadata service, AWS endpoints) is a closed loopback port.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use tokio::time::Instant;

use base64::Engine as _;
use stratus_images::table::BINARIES;

mod inputs;
mod modes;

use inputs::{ecr_cache, INPUTS, NO_CONFIG_INPUT};
use modes::MODES;

/// The secret every junk input carries; it must never come out.
const SECRET: &str = "stratus-canary-7f3a9c2e";

/// Most bytes a refusal may print (stdout and stderr together).
const MAX_OUTPUT: usize = 4096;

/// How long a refusal may take.
const DEADLINE: Duration = Duration::from_secs(15);

// ---------------------------------------------------------------------------------------------
// Part 1: no error echoes content (the inputs are listed in `inputs.rs`).

/// One junk input: its bytes, and what must never appear in the output.
struct Junk {
    name: &'static str,
    bytes: Vec<u8>,
    forbidden: Vec<String>,
}

/// A kubeconfig whose user's token is the secret.
fn kubeconfig() -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: parent\n  cluster:\n    server: https://127.0.0.1:1\ncontexts:\n- name: parent\n  context: {{cluster: parent, user: admin, namespace: ns}}\ncurrent-context: parent\nusers:\n- name: admin\n  user:\n    token: {SECRET}\n"
    )
}

/// Every 24-character window of `text` (a piece of a hidden secret).
fn windows(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars
        .windows(24)
        .step_by(4)
        .map(|w| w.iter().collect())
        .collect()
}

fn junk_shapes() -> Vec<Junk> {
    let secret = vec![SECRET.to_string()];
    let b64 = base64::engine::general_purpose::STANDARD.encode(kubeconfig());
    let mut binary: Vec<u8> = vec![0, 0xff, 0xfe, 0x80, b'\n', 1, 2];
    binary.extend_from_slice(SECRET.as_bytes());
    binary.extend((0u32..4096).map(|i| (i * 7919 % 251) as u8));
    let mut long_line = SECRET.to_string();
    long_line.push_str(&"A".repeat(10 << 20));
    long_line.push_str(SECRET);
    vec![
        Junk {
            name: "a one-line base64 kubeconfig",
            bytes: b64.clone().into_bytes(),
            forbidden: [secret.clone(), windows(&b64)].concat(),
        },
        Junk {
            name: "a 10 MiB line",
            bytes: long_line.into_bytes(),
            forbidden: [secret.clone(), vec!["A".repeat(32)]].concat(),
        },
        Junk {
            name: "binary garbage",
            bytes: binary,
            forbidden: secret.clone(),
        },
        Junk {
            name: "YAML with the secret in wrongly typed fields",
            bytes: format!(
                "kubernetes_config_base64: [{SECRET}]\nnamespace: {{a: {SECRET}}}\nclusters: {SECRET}\ncurrent-context: [{SECRET}]\nclouds: {SECRET}\nkind: [{SECRET}]\n"
            )
            .into_bytes(),
            forbidden: secret.clone(),
        },
        Junk {
            name: "YAML with the secret as values of the right type",
            bytes: format!(
                "kubernetes_config_base64: \"{SECRET}!!\"\nnamespace: \"{SECRET}_NS\"\nkind: {SECRET}\napiVersion: {SECRET}\nleaderName: {SECRET}_\nresourceLock: {SECRET}\n"
            )
            .into_bytes(),
            forbidden: secret.clone(),
        },
        Junk {
            name: "a kubeconfig with the secret as its context and server",
            bytes: kubeconfig()
                .replace("current-context: parent", &format!("current-context: {SECRET}"))
                .replace("https://127.0.0.1:1", &format!("{SECRET} not a url"))
                .into_bytes(),
            forbidden: secret.clone(),
        },
        Junk {
            name: "JSON with the secret in wrongly typed and unknown fields",
            bytes: format!(
                "{{\"kubernetes_config_base64\": 5, \"apiVersion\": \"{SECRET}\", \"kind\": \"{SECRET}\", \"namespace\": [\"{SECRET}\"], \"serviceAccountToken\": \"{SECRET}\", \"x\": \"{SECRET}\"}}"
            )
            .into_bytes(),
            forbidden: secret.clone(),
        },
        Junk {
            name: "INI with the secret as wrongly typed and unknown values",
            bytes: format!(
                "[Global]\nRegion = {SECRET}\nZone = \"{SECRET}\"\nDisableSecurityGroupIngress = {SECRET}\nNodeIPFamilies = {SECRET}\nauth-url = {SECRET}\ntls-insecure = {SECRET}\nos-endpoint-type = {SECRET}\nunknown-key = {SECRET}\n[LoadBalancer]\nmonitor-delay = {SECRET}\nlb-method = {SECRET}\n[BlockStorage]\nnode-volume-attach-limit = {SECRET}\n"
            )
            .into_bytes(),
            forbidden: secret.clone(),
        },
        Junk {
            name: "a PEM key without its end",
            bytes: format!("-----BEGIN PRIVATE KEY-----\n{SECRET}MIIEvQIBADANBgkqhkiG9w0BAQEF\n")
                .into_bytes(),
            forbidden: [secret.clone(), vec!["MIIEvQIBADANBgkqhkiG9w0BAQEF".into()]].concat(),
        },
        Junk {
            name: "a PEM section of garbage",
            bytes: format!(
                "-----BEGIN {SECRET}-----\n{SECRET}!!\n-----END {SECRET}-----\n-----BEGIN CERTIFICATE-----\n{SECRET}%%\n-----END CERTIFICATE-----\n"
            )
            .into_bytes(),
            forbidden: secret,
        },
    ]
}

/// The valid serving certificate and key the inputs pair with junk.
fn certificate(dir: &Path) -> (PathBuf, PathBuf) {
    let pair = stratus_serving::self_signed::generate(&["localhost".to_string()]).unwrap();
    let (cert, key) = (dir.join("valid.crt"), dir.join("valid.key"));
    std::fs::write(&cert, &pair.cert_pem).unwrap();
    std::fs::write(&key, &pair.key_pem).unwrap();
    (cert, key)
}

#[test]
fn no_binary_echoes_a_config_file_or_a_credential() {
    let shipped: BTreeSet<&str> = BINARIES.iter().map(|b| b.name).collect();
    let covered: BTreeSet<&str> = INPUTS
        .iter()
        .map(|i| i.binary)
        .chain(NO_CONFIG_INPUT.iter().map(|(b, _)| *b))
        .collect();
    assert_eq!(
        shipped, covered,
        "every shipped binary has its config inputs listed"
    );

    let world = World::new();
    let (cert, key) = certificate(world.dir.path());
    let started = Instant::now();
    let mut runs = 0;
    for (j, junk) in junk_shapes().iter().enumerate() {
        let junk_path = world.dir.path().join(format!("junk-{j}"));
        std::fs::write(&junk_path, &junk.bytes).unwrap();
        let text = String::from_utf8(junk.bytes.clone())
            .ok()
            .filter(|t| t.len() < 64 * 1024 && !t.contains('\0'));
        for (i, input) in INPUTS.iter().enumerate() {
            let uses_text = input.env.iter().any(|(_, v)| v.contains("{junk-text}"));
            if uses_text && text.is_none() {
                continue;
            }
            let case = world.dir.path().join(format!("case-{j}-{i}"));
            std::fs::create_dir_all(&case).unwrap();
            let fill = |s: &str| {
                let s = s
                    .replace("{junk-text}", text.as_deref().unwrap_or_default())
                    .replace("{junk}", &junk_path.display().to_string())
                    .replace("{cert}", &cert.display().to_string())
                    .replace("{key}", &key.display().to_string())
                    .replace("{dir}", &case.display().to_string())
                    .replace("{closed}", &world.closed.to_string());
                for (placeholder, make) in [
                    ("{clouds-conf}", "clouds"),
                    ("{ca-conf}", "ca"),
                    ("{key-conf}", "key"),
                ] {
                    if s.contains(placeholder) {
                        let conf = openstack_conf(&case, make, &junk_path, &cert, world.closed);
                        return s.replace(placeholder, &conf.display().to_string());
                    }
                }
                if s.contains("{ecr-cache}") {
                    let cache = ecr_cache(&case, &junk_path);
                    return s.replace("{ecr-cache}", &cache.display().to_string());
                }
                for (placeholder, junk_file) in
                    [("{cert-is-junk}", "tls.crt"), ("{key-is-junk}", "tls.key")]
                {
                    if s.contains(placeholder) {
                        std::fs::copy(&cert, case.join("tls.crt")).unwrap();
                        std::fs::copy(&key, case.join("tls.key")).unwrap();
                        std::fs::copy(&junk_path, case.join(junk_file)).unwrap();
                        return s.replace(placeholder, &case.display().to_string());
                    }
                }
                s
            };
            let args: Vec<String> = input.args.iter().map(|a| fill(a)).collect();
            let env: Vec<(String, String)> = input
                .env
                .iter()
                .map(|(k, v)| (k.to_string(), fill(v)))
                .collect();
            let stdin = input.stdin.map(|s| {
                if s == "{junk}" {
                    junk.bytes.clone()
                } else {
                    s.as_bytes().to_vec()
                }
            });
            let what = format!("{} {args:?} {env:?} with {}", input.binary, junk.name);
            let path = stratus_scenarios::ccm::sibling_binary(input.binary).unwrap();
            let out = world.run(&path, &args, &env, stdin.as_deref());
            runs += 1;
            if let Err(e) = refusal(&out, junk, input.names.map(fill).as_deref()) {
                panic!("{what}: {e}");
            }
        }
    }
    eprintln!(
        "{runs} refusals of junk by {} inputs of {} binaries in {:.1?}",
        INPUTS.len(),
        shipped.len(),
        started.elapsed()
    );
}

/// Whether `out` is a proper refusal of `junk`: non-zero, short, without anything of the secret,
/// naming `names` when given.
fn refusal(out: &Outcome, junk: &Junk, names: Option<&str>) -> Result<(), String> {
    let shown = || out.text.chars().take(2000).collect::<String>();
    if out.code == Some(0) {
        return Err(format!("exit 0:\n{}", shown()));
    }
    if out.text.len() >= MAX_OUTPUT {
        return Err(format!("{} bytes of output:\n{}", out.text.len(), shown()));
    }
    if let Some(forbidden) = junk
        .forbidden
        .iter()
        .find(|f| out.text.contains(f.as_str()))
    {
        return Err(format!("the output holds {forbidden:?}:\n{}", shown()));
    }
    match names {
        Some(names) if !out.text.contains(names) => {
            Err(format!("{names:?} not named:\n{}", shown()))
        }
        _ => Ok(()),
    }
}

/// A cloud.conf with valid credentials (Keystone on a closed port) whose `clouds-file`, `ca-file`
/// or `key-file` (with a valid `cert-file`) is `junk`.
fn openstack_conf(dir: &Path, which: &str, junk: &Path, cert: &Path, closed: u16) -> PathBuf {
    let global = os_global(closed);
    let text = match which {
        "clouds" => format!(
            "[Global]\nuse-clouds = true\nclouds-file = {}\n",
            junk.display()
        ),
        "ca" => format!("{global}ca-file = {}\n", junk.display()),
        _ => format!(
            "{global}cert-file = {}\nkey-file = {}\n",
            cert.display(),
            junk.display()
        ),
    };
    let path = dir.join(format!("cloud-{which}.conf"));
    std::fs::write(&path, text).unwrap();
    path
}

/// A valid `[Global]`: password credentials, Keystone on the `closed` port.
fn os_global(closed: u16) -> String {
    format!(
        "[Global]\nauth-url = http://127.0.0.1:{closed}/v3\nusername = u\npassword = p\ntenant-name = t\ndomain-name = Default\n"
    )
}

// ---------------------------------------------------------------------------------------------
// Part 2: everything needed is checked before serving (the modes are listed in `modes.rs`).

#[test]
fn every_binary_names_every_missing_setting_before_it_serves() {
    let shipped: BTreeSet<&str> = BINARIES.iter().map(|b| b.name).collect();
    let covered: BTreeSet<&str> = MODES.iter().map(|m| m.binary).collect();
    assert_eq!(
        shipped, covered,
        "every shipped binary has its modes listed"
    );

    let world = World::new();
    let held = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port();
    let started = Instant::now();
    for (i, m) in MODES.iter().enumerate() {
        let case = world.dir.path().join(format!("mode-{i}"));
        std::fs::create_dir_all(&case).unwrap();
        let empty_conf = case.join("empty.conf");
        std::fs::write(&empty_conf, "[Global]\n").unwrap();
        let os_conf = case.join("os.conf");
        std::fs::write(&os_conf, os_global(world.closed)).unwrap();
        let fill = |s: &str| {
            s.replace("{dir}", &case.display().to_string())
                .replace("{port}", &port.to_string())
                .replace("{closed}", &world.closed.to_string())
                .replace("{empty-conf}", &empty_conf.display().to_string())
                .replace("{os-conf}", &os_conf.display().to_string())
        };
        let args: Vec<String> = m.args.iter().map(|a| fill(a)).collect();
        let env: Vec<(String, String)> = m
            .env
            .iter()
            .map(|(k, v)| (k.to_string(), fill(v)))
            .collect();
        let what = format!("{} {args:?}", m.binary);
        let path = stratus_scenarios::ccm::sibling_binary(m.binary).unwrap();
        let out = world.run(&path, &args, &env, m.stdin.map(str::as_bytes));
        assert!(out.code != Some(0), "{what}: exit 0\n{}", out.text);
        assert!(
            out.elapsed < Duration::from_secs(10),
            "{what}: took {:?}",
            out.elapsed
        );
        for needle in m.named {
            assert!(
                out.text.contains(needle),
                "{what}: {needle:?} not named:\n{}",
                out.text
            );
        }
        let lower = out.text.to_lowercase();
        assert!(
            !lower.contains("serving"),
            "{what}: it served:\n{}",
            out.text
        );
        assert!(
            !lower.contains("in use") && !out.text.contains(&format!(":{port}")),
            "{what}: it tried to bind its port:\n{}",
            out.text
        );
        assert!(
            !case.join("csi.sock").exists(),
            "{what}: it made its CSI socket"
        );
        assert!(
            out.text.len() < MAX_OUTPUT,
            "{what}: {} bytes:\n{}",
            out.text.len(),
            out.text
        );
    }
    eprintln!(
        "{} modes of {} binaries refused in {:.1?}",
        MODES.len(),
        shipped.len(),
        started.elapsed()
    );
    drop(held);
}

// ---------------------------------------------------------------------------------------------
// The harness.

/// A fresh `$HOME`, a closed port, and how binaries are run.
struct World {
    dir: tempfile::TempDir,
    home: PathBuf,
    /// A loopback port nothing listens on.
    closed: u16,
}

/// What a run printed and how it ended.
struct Outcome {
    code: Option<i32>,
    /// stdout, then stderr.
    text: String,
    elapsed: Duration,
}

impl World {
    fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let closed = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        World { dir, home, closed }
    }

    /// Runs `binary` with `args`, an empty environment but for `env` and the closed metadata
    /// endpoints, `stdin` (or none); kills it at [`DEADLINE`] and fails.
    fn run(
        &self,
        binary: &Path,
        args: &[String],
        env: &[(String, String)],
        stdin: Option<&[u8]>,
    ) -> Outcome {
        let closed = format!("http://127.0.0.1:{}", self.closed);
        let mut cmd = Command::new(binary);
        cmd.args(args)
            .env_clear()
            .env("HOME", &self.home)
            .env("NO_COLOR", "1")
            .env("AWS_EC2_METADATA_SERVICE_ENDPOINT", &closed)
            .env("INSTANCE_METADATA_URL", &closed)
            .env(
                "CINDER_CSI_METADATA_URL",
                format!("{closed}/openstack/latest/meta_data.json"),
            )
            .env("AWS_ENDPOINT_URL", &closed)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let started = Instant::now();
        let mut child = cmd.spawn().expect("spawn");
        let feeder = stdin.map(|bytes| {
            let mut pipe = child.stdin.take().unwrap();
            let bytes = bytes.to_vec();
            // The process may exit before it read everything: a broken pipe is fine.
            std::thread::spawn(move || drop(pipe.write_all(&bytes)))
        });
        let mut stdout = child.stdout.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let out = std::thread::spawn(move || {
            let mut b = Vec::new();
            let _ = stdout.read_to_end(&mut b);
            b
        });
        let err = std::thread::spawn(move || {
            let mut b = Vec::new();
            let _ = stderr.read_to_end(&mut b);
            b
        });
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > DEADLINE {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "{} {args:?}: still running after {DEADLINE:?}",
                    binary.display()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let elapsed = started.elapsed();
        if let Some(feeder) = feeder {
            feeder.join().unwrap();
        }
        let mut bytes = out.join().unwrap();
        bytes.extend(err.join().unwrap());
        Outcome {
            code: status.code(),
            text: String::from_utf8_lossy(&bytes).into_owned(),
            elapsed,
        }
    }
}

#[test]
fn the_harness_catches_a_binary_that_echoes_its_input() {
    // The checks must be able to fail: a process that prints what it read is caught, by the
    // secret, by a piece of the base64 it was hidden in, by its length, by its exit code.
    let world = World::new();
    let sh = Path::new("/bin/sh");
    let echo =
        |script: &str, stdin: &[u8]| world.run(sh, &["-c".into(), script.into()], &[], Some(stdin));
    for junk in junk_shapes() {
        let out = echo("cat; exit 3", &junk.bytes);
        assert!(refusal(&out, &junk, None).is_err(), "{}", junk.name);
    }
    let base64 = &junk_shapes()[0];
    let out = echo("head -c 60 | tail -c 30; exit 3", &base64.bytes);
    assert!(
        refusal(&out, base64, None).is_err(),
        "a piece of the base64"
    );
    let quiet = &junk_shapes()[2];
    let out = echo("cat >/dev/null; echo refused; exit 0", &quiet.bytes);
    assert!(refusal(&out, quiet, None).is_err(), "exit 0");
    let out = echo("cat >/dev/null; echo refused; exit 1", &quiet.bytes);
    assert!(refusal(&out, quiet, None).is_ok(), "{}", out.text);
    assert!(
        refusal(&out, quiet, Some("--cloud-config")).is_err(),
        "names"
    );
}
