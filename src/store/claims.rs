//! Retired image claims: the image ids a removed app's containers ran.
//! A remove_app forgets the app's record (freeing its name, port and quota
//! slot) but not volce-lab's claim on its images, so remove_image can still
//! take them once no container uses them; a completed remove_image drops
//! the claim. Runs as root inside the host helper, within the caller's
//! transaction (table `image_claims`, migration 5).

use std::collections::BTreeMap;

use rusqlite::params;

use super::StoreError;
use super::transitions::Tx;
use crate::vocab::{ImageId, PlanId};

impl Tx<'_> {
    /// Keeps `images` claimed for `app`, which this plan removes.
    pub fn retire_claims(
        &self,
        app: &str,
        images: &[ImageId],
        plan: &PlanId,
        now: i64,
    ) -> Result<(), StoreError> {
        let mut statement = self.sql.prepare(super::sql::RETIRE_CLAIM)?;
        for image in images {
            statement.execute(params![image.as_str(), app, plan.as_str(), now])?;
        }
        Ok(())
    }

    /// Every retired claim: image id -> the removed app that last used it.
    pub fn retired_claims(&self) -> Result<BTreeMap<ImageId, String>, StoreError> {
        let mut statement = self.sql.prepare(super::sql::RETIRED_CLAIMS)?;
        let rows = statement.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
        let mut claims = BTreeMap::new();
        for row in rows {
            let (image, app) = row?;
            claims.insert(ImageId::parse(&image).ok_or(StoreError::Corrupt)?, app);
        }
        Ok(claims)
    }

    /// The image is gone: nothing is left to claim.
    pub fn drop_claim(&self, image: &ImageId) -> Result<(), StoreError> {
        self.sql.prepare(super::sql::DROP_CLAIM)?.execute([image.as_str()])?;
        Ok(())
    }
}
