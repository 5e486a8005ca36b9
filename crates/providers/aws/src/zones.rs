//! Zone name → zone ID table, fetched once and refetched only when an unknown zone appears.

use std::collections::HashMap;
use std::time::Duration;
use tokio::time::Instant;

use stratus_cloud::CloudError;
use tokio::sync::Mutex;

use stratus_aws_api::ec2::Ec2;

/// Refetch the table at most this often, however many unknown zones are asked for.
const MIN_REFETCH: Duration = Duration::from_secs(60);

/// Cached `DescribeAvailabilityZones` answer.
pub struct ZoneIds {
    ec2: Ec2,
    table: Mutex<(HashMap<String, String>, Option<Instant>)>,
}

impl ZoneIds {
    /// An empty table that fills on first use.
    pub fn new(ec2: Ec2) -> Self {
        Self {
            ec2,
            table: Mutex::new((HashMap::new(), None)),
        }
    }

    /// The zone ID of `zone`, or `None` when AWS does not know the zone.
    pub async fn zone_id(&self, zone: &str) -> Result<Option<String>, CloudError> {
        let mut table = self.table.lock().await;
        if let Some(id) = table.0.get(zone) {
            return Ok(Some(id.clone()));
        }
        if table.1.is_some_and(|at| at.elapsed() < MIN_REFETCH) {
            return Ok(None);
        }
        table.0 = self.ec2.zone_ids().await?;
        table.1 = Some(Instant::now());
        Ok(table.0.get(zone).cloned())
    }
}
