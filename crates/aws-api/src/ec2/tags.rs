//! Tags on existing EC2 resources: CreateTags and DeleteTags, many resources per call.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::Tag;
use stratus_cloud::CloudError;

use super::{ec2_tags, Ec2};

/// Most resource IDs EC2 takes in one CreateTags or DeleteTags call.
pub const MAX_TAG_RESOURCES: usize = 1000;

fn check_batch(operation: &str, resources: &[String]) -> Result<(), CloudError> {
    if resources.len() > MAX_TAG_RESOURCES {
        return Err(CloudError::InvalidInput(format!(
            "{operation}: {} resources in one call, EC2 takes at most {MAX_TAG_RESOURCES}",
            resources.len()
        )));
    }
    Ok(())
}

impl Ec2 {
    /// Adds (or overwrites) `tags` on every resource of `resources` (at most
    /// [`MAX_TAG_RESOURCES`]) in one call. Nothing is sent for an empty list or tag set.
    pub async fn create_tags(
        &self,
        resources: &[String],
        tags: &BTreeMap<String, String>,
    ) -> Result<(), CloudError> {
        check_batch("CreateTags", resources)?;
        if resources.is_empty() || tags.is_empty() {
            return Ok(());
        }
        let tags = ec2_tags(tags);
        self.api
            .call("CreateTags", || {
                self.client
                    .create_tags()
                    .set_resources(Some(resources.to_vec()))
                    .set_tags(Some(tags.clone()))
                    .send()
            })
            .await?;
        Ok(())
    }

    /// Deletes `tags` from every resource of `resources` (at most [`MAX_TAG_RESOURCES`]) in one
    /// call; each tag only where it still has the given value. Nothing is sent for an empty list
    /// or tag set.
    pub async fn delete_tags(
        &self,
        resources: &[String],
        tags: &BTreeMap<String, String>,
    ) -> Result<(), CloudError> {
        check_batch("DeleteTags", resources)?;
        if resources.is_empty() || tags.is_empty() {
            return Ok(());
        }
        // With a value, EC2 deletes a key only while it has that value.
        let tags: Vec<Tag> = ec2_tags(tags);
        self.api
            .call("DeleteTags", || {
                self.client
                    .delete_tags()
                    .set_resources(Some(resources.to_vec()))
                    .set_tags(Some(tags.clone()))
                    .send()
            })
            .await?;
        Ok(())
    }
}
