//! One event file: TensorBoard's `events.out.tfevents.*` in a run directory.

use super::generated::{
    event, summary, summary_metadata, tensor_shape_proto, DataClass, DataType, Event, Summary,
    SummaryMetadata, TensorProto, TensorShapeProto,
};
use super::histogram;
use super::record::frame;
use crate::{Error, Result};
use prost::Message;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Buffered records past this size, or older than this, are written out before the next
/// flush point (the age is TensorFlow's summary writers' default, so that batch-level
/// series show up during a long epoch as they do with Keras).
const FLUSH_AT: usize = 1 << 20;
const FLUSH_AFTER: std::time::Duration = std::time::Duration::from_secs(120);

/// Numbers the files this process opens, so that two opened in the same second differ
/// (TensorFlow's file writers do the same).
static FILE_COUNT: AtomicU64 = AtomicU64::new(0);

/// Writes framed Event records to one file. Records are kept in memory and written whole
/// at [`flush`](EventWriter::flush): a reader never meets a record cut in two by a partial
/// write (it may meet a file that ends early, which TensorBoard's loader waits on).
pub(crate) struct EventWriter {
    path: PathBuf,
    file: std::fs::File,
    pending: Vec<u8>,
    flushed_at: std::time::Instant,
    /// Tags whose plugin metadata has been written (TensorBoard reads it from a tag's
    /// first value).
    described: std::collections::HashSet<String>,
}

impl EventWriter {
    /// Creates `dir` if needed and a new event file in it, named as TensorFlow's summary
    /// writers name theirs, starting with the file-version record.
    pub fn create(dir: &Path) -> Result<EventWriter> {
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        let secs = now().floor() as u64;
        let n = FILE_COUNT.fetch_add(1, Ordering::Relaxed);
        let name = format!(
            "events.out.tfevents.{secs:010}.{}.{}.{n}.v2",
            hostname(),
            std::process::id()
        );
        let path = dir.join(name);
        let file = std::fs::OpenOptions::new()
            .create_new(true)
            .write(true)
            .open(&path)
            .map_err(|e| io(&path, e))?;
        let mut w = EventWriter {
            path,
            file,
            pending: Vec::new(),
            flushed_at: std::time::Instant::now(),
            described: Default::default(),
        };
        w.push(Event {
            wall_time: now(),
            step: 0,
            what: Some(event::What::FileVersion("brain.Event:2".into())),
        })?;
        w.flush()?;
        Ok(w)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A scalar as TF2's `tf.summary.scalar` writes it: a float32 tensor of shape `[]`
    /// under the `scalars` plugin.
    pub fn scalar(&mut self, tag: &str, value: f32, step: i64) -> Result<()> {
        let tensor = TensorProto {
            dtype: DataType::DtFloat as i32,
            tensor_shape: Some(TensorShapeProto { dim: Vec::new() }),
            float_val: vec![value],
            double_val: Vec::new(),
        };
        self.value(tag, "scalars", DataClass::Scalar, tensor, step)
    }

    /// A histogram as TF2's `tf.summary.histogram` writes it: a float64 tensor of
    /// `[left edge, right edge, count]` rows under the `histograms` plugin.
    pub fn histogram(&mut self, tag: &str, data: &[f64], step: i64) -> Result<()> {
        let rows = histogram::buckets(data, histogram::DEFAULT_BUCKETS);
        let tensor = TensorProto {
            dtype: DataType::DtDouble as i32,
            tensor_shape: Some(TensorShapeProto {
                dim: [rows.len() as i64, 3]
                    .into_iter()
                    .map(|size| tensor_shape_proto::Dim {
                        size,
                        name: String::new(),
                    })
                    .collect(),
            }),
            float_val: Vec::new(),
            double_val: rows.into_iter().flatten().collect(),
        };
        self.value(tag, "histograms", DataClass::Tensor, tensor, step)
    }

    fn value(
        &mut self,
        tag: &str,
        plugin: &str,
        class: DataClass,
        tensor: TensorProto,
        step: i64,
    ) -> Result<()> {
        let metadata = (!self.described.contains(tag)).then(|| SummaryMetadata {
            plugin_data: Some(summary_metadata::PluginData {
                plugin_name: plugin.into(),
                // The plugins' own PluginData messages at version 0 encode to nothing.
                content: Vec::new(),
            }),
            display_name: String::new(),
            summary_description: String::new(),
            data_class: class as i32,
        });
        if metadata.is_some() {
            self.described.insert(tag.to_string());
        }
        self.push(Event {
            wall_time: now(),
            step,
            what: Some(event::What::Summary(Summary {
                value: vec![summary::Value {
                    tag: tag.into(),
                    metadata,
                    value: Some(summary::value::Value::Tensor(tensor)),
                }],
            })),
        })
    }

    fn push(&mut self, e: Event) -> Result<()> {
        frame(&e.encode_to_vec(), &mut self.pending);
        if self.pending.len() >= FLUSH_AT || self.flushed_at.elapsed() >= FLUSH_AFTER {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes the buffered records out and hands them to the operating system.
    pub fn flush(&mut self) -> Result<()> {
        if !self.pending.is_empty() {
            self.file
                .write_all(&self.pending)
                .and_then(|()| self.file.flush())
                .map_err(|e| io(&self.path, e))?;
            self.pending.clear();
        }
        self.flushed_at = std::time::Instant::now();
        Ok(())
    }

    /// Flushes, then makes the file durable.
    pub fn close(mut self) -> Result<()> {
        self.flush()?;
        self.file.sync_all().map_err(|e| io(&self.path, e))
    }
}

impl Drop for EventWriter {
    /// A run that ends in an error still leaves what it logged (errors here have no one
    /// to go to; `close` reports them).
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

fn io(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        source,
    }
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The host's name, as in TensorFlow's event-file names; `localhost` where the system
/// does not say.
fn hostname() -> String {
    let from_kernel = std::fs::read_to_string("/proc/sys/kernel/hostname").ok();
    let name = from_kernel
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| std::env::var("COMPUTERNAME").ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    // The name is one component of a dot-separated file name.
    let clean: String = name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .collect();
    if clean.is_empty() {
        "localhost".into()
    } else {
        clean
    }
}
