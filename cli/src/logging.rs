//! The daemons' logging: `--log-format text|json` (else the yarn-site key
//! `spindle.log.format`, else `text`), shared by the `resourcemanager` and `nodemanager`
//! binaries.
//!
//! `text` is tracing-subscriber's usual line, spans shown as `container{container_id=..}:`.
//! `json` writes one JSON object per line: `timestamp`, `level`, `target`, `message`, the
//! event's own fields, `spans` (the enclosing spans' names, outermost first), and every field
//! of every enclosing span flattened to the top level (an inner span's value wins, an event's
//! own field wins over both), so that a log shipper sees `app_id`, `attempt_id`,
//! `container_id` and `node_id` on each line without knowing the span tree.
//!
//! tracing-subscriber's own `json` formatter nests span fields under `span`/`spans`, so the
//! flattening is done here: span fields are kept as a JSON object per span
//! ([`JsonSpanFields`]) and merged by [`JsonLines`].
//!
//! Audit lines (the `RMAuditLogger` target) go to the file `spindle.audit.log-file` names,
//! when it is set, else to the daemon's log.
//!
//! Must not: know either daemon's state; it only turns events into lines.

use std::fmt;
use std::str::FromStr;

use serde_json::{Map, Value};
use spindle_common::config::{keys, ConfigError, Configuration};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// How a daemon writes its log lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// One human-readable line per event.
    Text,
    /// One JSON object per line, span fields flattened.
    Json,
}

/// A log format that is neither `text` nor `json`.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown log format '{0}'; expected 'text' or 'json'")]
pub struct UnknownLogFormat(pub String);

impl FromStr for LogFormat {
    type Err = UnknownLogFormat;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            _ => Err(UnknownLogFormat(s.to_string())),
        }
    }
}

/// Why the log format could not be decided.
#[derive(Debug, thiserror::Error)]
pub enum LogFormatError {
    /// `spindle.log.format` holds something other than `text` or `json`.
    #[error("{key}: {source}")]
    BadKey {
        key: &'static str,
        #[source]
        source: UnknownLogFormat,
    },
    /// The key could not be read (a bad `${}` reference).
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// The flag's format if given, else `spindle.log.format`'s, else text.
pub fn resolve(flag: Option<LogFormat>, conf: &Configuration) -> Result<LogFormat, LogFormatError> {
    if let Some(f) = flag {
        return Ok(f);
    }
    let raw = conf.get_string(keys::LOG_FORMAT, keys::DEFAULT_LOG_FORMAT)?;
    raw.parse().map_err(|source| LogFormatError::BadKey {
        key: keys::LOG_FORMAT,
        source,
    })
}

/// Installs the global subscriber: stderr, `RUST_LOG` else `info`, in `format`.
pub fn init(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init(),
        LogFormat::Json => builder
            .with_ansi(false)
            .fmt_fields(JsonSpanFields)
            .event_format(JsonLines)
            .try_init(),
    };
}

/// Where audit lines go: the file `spindle.audit.log-file` names, if set.
pub fn audit_file(conf: &Configuration) -> Result<Option<std::path::PathBuf>, ConfigError> {
    Ok(conf
        .get_nonempty(keys::SPINDLE_AUDIT_LOG_FILE)?
        .map(|p| std::path::PathBuf::from(p.trim())))
}

/// The audit file could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("{key} {}: cannot open it for appending: {source}", path.display())]
pub struct AuditFileError {
    pub key: &'static str,
    pub path: std::path::PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// [`init`], with the audit lines (tracing target `RMAuditLogger`, what
/// `spindle_rest_edge::audit` writes) appended to `audit` instead, as text lines, the file
/// created `0600`. Every other line goes to stderr as [`init`] writes it. Without a file the
/// audit lines stay in the daemon's log.
pub fn init_with_audit(
    format: LogFormat,
    audit: Option<&std::path::Path>,
) -> Result<(), AuditFileError> {
    use std::os::unix::fs::OpenOptionsExt;
    use tracing_subscriber::filter::{filter_fn, FilterExt, Targets};
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;
    let Some(path) = audit else {
        init(format);
        return Ok(());
    };
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
        .map_err(|source| AuditFileError {
            key: keys::SPINDLE_AUDIT_LOG_FILE,
            path: path.to_path_buf(),
            source,
        })?;
    let audit_target = spindle_rest_edge::audit::TARGET;
    let env = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let daemon = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let daemon = match format {
        LogFormat::Text => daemon
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .boxed(),
        LogFormat::Json => daemon
            .with_ansi(false)
            .fmt_fields(JsonSpanFields)
            .event_format(JsonLines)
            .boxed(),
    };
    let audit_layer = tracing_subscriber::fmt::layer()
        .with_writer(std::sync::Mutex::new(file))
        .with_ansi(false)
        .with_filter(Targets::new().with_target(audit_target, tracing::Level::INFO));
    let _ = tracing_subscriber::registry()
        .with(daemon.with_filter(env.and(filter_fn(move |m| m.target() != audit_target))))
        .with(audit_layer)
        .try_init();
    Ok(())
}

/// Collects fields into a JSON object: numbers and booleans as themselves, everything else
/// (ids included, recorded with `%`) as its text.
struct JsonVisitor<'a>(&'a mut Map<String, Value>);

impl Visit for JsonVisitor<'_> {
    fn record_f64(&mut self, field: &Field, value: f64) {
        let v = serde_json::Number::from_f64(value)
            .map(Value::Number)
            .unwrap_or_else(|| Value::String(value.to_string()));
        self.0.insert(field.name().to_string(), v);
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_string(), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_string(), value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_string(), value.into());
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.into());
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.0
            .insert(field.name().to_string(), value.to_string().into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        // `log` records bridged by tracing-log carry their origin as `log.*` fields.
        if field.name().starts_with("log.") {
            return;
        }
        self.0
            .insert(field.name().to_string(), format!("{value:?}").into());
    }
}

/// Keeps each span's fields as one JSON object (the text of `FormattedFields`), merged when
/// the span records more.
pub struct JsonSpanFields;

impl<'w> FormatFields<'w> for JsonSpanFields {
    fn format_fields<R: RecordFields>(&self, mut writer: Writer<'w>, fields: R) -> fmt::Result {
        let mut map = Map::new();
        fields.record(&mut JsonVisitor(&mut map));
        write!(writer, "{}", Value::Object(map))
    }

    fn add_fields(
        &self,
        current: &'w mut FormattedFields<Self>,
        fields: &tracing::span::Record<'_>,
    ) -> fmt::Result {
        let mut map = match serde_json::from_str::<Value>(&current.fields) {
            Ok(Value::Object(m)) => m,
            _ => Map::new(),
        };
        fields.record(&mut JsonVisitor(&mut map));
        current.fields = Value::Object(map).to_string();
        Ok(())
    }
}

/// One JSON object per event, the enclosing spans' fields flattened into it.
pub struct JsonLines;

impl<S> FormatEvent<S, JsonSpanFields> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, JsonSpanFields>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        let mut line = Map::new();
        let mut ts = String::new();
        SystemTime.format_time(&mut Writer::new(&mut ts))?;
        line.insert("timestamp".into(), ts.into());
        line.insert("level".into(), meta.level().as_str().into());
        line.insert("target".into(), meta.target().into());
        let mut names = Vec::new();
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                names.push(Value::String(span.name().to_string()));
                let ext = span.extensions();
                if let Some(f) = ext.get::<FormattedFields<JsonSpanFields>>() {
                    if let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(&f.fields) {
                        line.extend(fields);
                    }
                }
            }
        }
        if !names.is_empty() {
            line.insert("spans".into(), Value::Array(names));
        }
        event.record(&mut JsonVisitor(&mut line));
        writeln!(writer, "{}", Value::Object(line))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);
    impl Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn parses_both_formats_and_names_a_bad_one() {
        assert_eq!("text".parse::<LogFormat>(), Ok(LogFormat::Text));
        assert_eq!(" JSON ".parse::<LogFormat>(), Ok(LogFormat::Json));
        let e = "xml".parse::<LogFormat>().unwrap_err();
        assert_eq!(e, UnknownLogFormat("xml".into()));
        assert!(e.to_string().contains("'xml'"), "{e}");
    }

    #[test]
    fn flag_wins_over_the_key_and_a_bad_key_is_named() {
        let mut conf = Configuration::new();
        assert_eq!(resolve(None, &conf).unwrap(), LogFormat::Text);
        conf.set(keys::LOG_FORMAT, "json");
        assert_eq!(resolve(None, &conf).unwrap(), LogFormat::Json);
        assert_eq!(
            resolve(Some(LogFormat::Text), &conf).unwrap(),
            LogFormat::Text
        );
        conf.set(keys::LOG_FORMAT, "yaml");
        match resolve(None, &conf) {
            Err(LogFormatError::BadKey { key, source }) => {
                assert_eq!(key, "spindle.log.format");
                assert_eq!(source, UnknownLogFormat("yaml".into()));
            }
            other => panic!("expected BadKey, got {other:?}"),
        }
    }

    #[test]
    fn json_lines_flatten_span_fields_inner_wins() {
        let buf = Buf::default();
        let w = buf.clone();
        let sub = tracing_subscriber::fmt()
            .with_writer(move || w.clone())
            .with_ansi(false)
            .fmt_fields(JsonSpanFields)
            .event_format(JsonLines)
            .finish();
        tracing::subscriber::with_default(sub, || {
            let app = tracing::info_span!("app", app_id = %"application_1_0001", n = 1u64);
            let _a = app.enter();
            let c =
                tracing::info_span!("container", container_id = tracing::field::Empty, n = 2u64);
            c.record("container_id", "container_1_0001_01_000002");
            let _c = c.enter();
            tracing::info!(exit = 0i64, "container ended \"ok\"");
        });
        let out = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 1, "{out}");
        let v: Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(v["app_id"], "application_1_0001");
        assert_eq!(v["container_id"], "container_1_0001_01_000002");
        assert_eq!(v["n"], 2, "the inner span's field wins");
        assert_eq!(v["exit"], 0);
        assert_eq!(v["level"], "INFO");
        assert_eq!(v["message"], "container ended \"ok\"");
        assert_eq!(v["spans"], serde_json::json!(["app", "container"]));
        assert!(v["timestamp"].as_str().is_some_and(|t| !t.is_empty()));
    }
}
