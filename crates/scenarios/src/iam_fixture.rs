//! IAM instance profiles in moto (RunInstances naming a profile moto does not hold fails): IAM's
//! query protocol straight to moto's endpoint, since the workspace has no IAM SDK client.

use anyhow::Result;

use crate::moto_call;

/// Creates the instance profile `name` in moto at `endpoint` (`http://host:port`).
pub async fn create_instance_profile(endpoint: &str, name: &str) -> Result<()> {
    let body = form_urlencoded::Serializer::new(String::new())
        .append_pair("Action", "CreateInstanceProfile")
        .append_pair("Version", "2010-05-08")
        .append_pair("InstanceProfileName", name)
        .finish();
    moto_call::post(
        endpoint,
        "iam",
        &[(
            "content-type",
            "application/x-www-form-urlencoded; charset=utf-8",
        )],
        body,
        "CreateInstanceProfile",
    )
    .await?;
    Ok(())
}
