//! The cloud-provider webhook flags (`--webhooks`, `--webhook-secure-port`, …), as upstream's
//! cloud-controller-manager: a provider may register admission webhooks that the process serves
//! on their own port when the `CloudControllerManagerWebhook` gate is on. No provider Stratus
//! builds registers one — as upstream's AWS and OpenStack providers — so a webhook name is
//! refused as unknown (upstream's check) and no port is opened, which is upstream's behaviour
//! with no webhook enabled.

use std::net::IpAddr;
use std::path::PathBuf;

use clap::Args;

/// The webhooks the providers of this build register.
pub const KNOWN_WEBHOOKS: &[&str] = &[];

/// Upstream's default webhook port.
pub const WEBHOOK_PORT: u16 = 10260;

/// `--webhooks` and the webhook serving flags.
#[derive(Debug, Clone, Args)]
pub struct WebhookArgs {
    /// Webhooks to serve: `*` for those on by default, `name` to enable, `-name` to disable.
    /// Known webhooks: none.
    #[arg(long = "webhooks", value_delimiter = ',')]
    pub webhooks: Vec<String>,
    /// Port the webhooks are served on; 0: never served.
    #[arg(long = "webhook-secure-port", default_value_t = WEBHOOK_PORT)]
    pub webhook_secure_port: u16,
    /// Address the webhook port listens on.
    #[arg(long = "webhook-bind-address", default_value = "0.0.0.0")]
    pub webhook_bind_address: IpAddr,
    /// Where the webhook port's self-signed certificate is kept.
    #[arg(long = "webhook-cert-dir")]
    pub webhook_cert_dir: Option<PathBuf>,
    /// PEM certificate of the webhook port.
    #[arg(
        long = "webhook-tls-cert-file",
        requires = "webhook_tls_private_key_file"
    )]
    pub webhook_tls_cert_file: Option<PathBuf>,
    /// PEM private key of --webhook-tls-cert-file.
    #[arg(
        long = "webhook-tls-private-key-file",
        requires = "webhook_tls_cert_file"
    )]
    pub webhook_tls_private_key_file: Option<PathBuf>,
}

impl WebhookArgs {
    /// The webhooks to serve, or upstream's error for a name no provider registers.
    pub fn enabled(&self) -> Result<Vec<String>, String> {
        let mut enabled = Vec::new();
        for item in self
            .webhooks
            .iter()
            .map(|w| w.trim())
            .filter(|w| !w.is_empty())
        {
            if item == "*" {
                continue;
            }
            let name = item.trim_start_matches('-');
            if !KNOWN_WEBHOOKS.contains(&name) {
                return Err(format!(
                    "--webhooks: {name:?} is not in the list of known webhooks (the providers of this build register none)"
                ));
            }
            if !item.starts_with('-') {
                enabled.push(name.to_string());
            }
        }
        Ok(enabled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        w: WebhookArgs,
    }

    fn parse(args: &[&str]) -> Result<WebhookArgs, clap::Error> {
        Flags::try_parse_from(std::iter::once("x").chain(args.iter().copied())).map(|f| f.w)
    }

    #[test]
    fn flags_and_names() {
        let w = parse(&[]).unwrap();
        assert_eq!(w.webhook_secure_port, 10260);
        assert_eq!(w.enabled().unwrap(), Vec::<String>::new());
        let w = parse(&[
            "--webhooks=*",
            "--webhook-secure-port=0",
            "--webhook-bind-address=127.0.0.1",
            "--webhook-cert-dir=/tmp/w",
            "--webhook-tls-cert-file=/w/tls.crt",
            "--webhook-tls-private-key-file=/w/tls.key",
        ])
        .unwrap();
        assert_eq!(w.enabled().unwrap(), Vec::<String>::new());
        let e = parse(&["--webhooks=*,nodes"])
            .unwrap()
            .enabled()
            .unwrap_err();
        assert!(
            e.contains("\"nodes\" is not in the list of known webhooks"),
            "{e}"
        );
        assert!(parse(&["--webhooks=-nodes"]).unwrap().enabled().is_err());
        assert!(parse(&["--webhook-tls-cert-file=/w/tls.crt"]).is_err());
        assert!(parse(&["--webhook-secure-port=70000"]).is_err());
    }
}
