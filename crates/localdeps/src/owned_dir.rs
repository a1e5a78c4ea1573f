//! A temp dir announced to a [`Spawner`]: when it is created and once it is gone. A process that dies by
//! SIGKILL or the OOM killer runs no destructor, so its temp dirs (a PostgreSQL cluster, a dataset) would
//! stay behind; an owner that outlives it (compare's reaper) removes the ones still announced.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::Spawner;

/// Removed when dropped, then announced gone.
pub struct OwnedDir {
    dir: Option<tempfile::TempDir>,
    path: PathBuf,
    spawner: Arc<dyn Spawner>,
}

impl OwnedDir {
    /// A new dir under the system temp dir (`TMPDIR`), named `<prefix><random>`.
    pub fn create(prefix: &str, spawner: Arc<dyn Spawner>) -> io::Result<OwnedDir> {
        let dir = tempfile::Builder::new().prefix(prefix).tempdir()?;
        let path = dir.path().to_path_buf();
        spawner.dir_created(&path);
        Ok(OwnedDir { dir: Some(dir), path, spawner })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for OwnedDir {
    fn drop(&mut self) {
        // Removed first, announced after: a crash in between leaves the owner removing a dir already gone.
        if let Some(dir) = self.dir.take() {
            let _ = dir.close();
        }
        self.spawner.dir_removed(&self.path);
    }
}

impl std::fmt::Debug for OwnedDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnedDir").field("path", &self.path).finish_non_exhaustive()
    }
}
