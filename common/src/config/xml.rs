//! The Hadoop configuration document, read with `quick-xml`:
//!
//! ```xml
//! <configuration>
//!   <property>
//!     <name>yarn.nodemanager.resource.memory-mb</name>
//!     <value>8192</value>
//!     <final>true</final>          <!-- optional -->
//!     <description>...</description>  <!-- ignored, like <source> and <tag> -->
//!   </property>
//! </configuration>
//! ```
//!
//! Safety: quick-xml never fetches anything. A `<!DOCTYPE>` (even one naming an external
//! DTD) is skipped unread, and only the five predefined entities and numeric character
//! references are expanded; any other `&name;` is an error, so an entity declared in a DTD
//! can neither leak a file nor blow up memory.
//!
//! Leniency, as in Hadoop: unknown elements inside `<configuration>` or `<property>` are
//! ignored with their content, text between properties is ignored, a property without
//! `<value>` defines nothing. Strictness, because a bad edit must be refused with a line
//! number rather than half-applied: a property without `<name>`, a repeated `<name>`,
//! `<value>` or `<final>`, markup inside them, `<final>` other than true/false, and
//! `<xi:include>` (not supported) are errors.

use std::path::Path;

use quick_xml::errors::IllFormedError;
use quick_xml::events::{BytesStart, Event};
use quick_xml::Reader;

use super::ConfigError;

/// One `<property>` as written.
#[derive(Debug)]
pub(super) struct Parsed {
    pub name: String,
    pub value: String,
    pub is_final: bool,
    /// Line of the `<property>` tag.
    pub line: u32,
}

/// Byte offset -> 1-based line number.
struct Lines(Vec<usize>);

impl Lines {
    fn new(text: &str) -> Self {
        Lines(
            text.bytes()
                .enumerate()
                .filter(|&(_, b)| b == b'\n')
                .map(|(i, _)| i)
                .collect(),
        )
    }

    fn line(&self, offset: u64) -> u32 {
        let offset = usize::try_from(offset).unwrap_or(usize::MAX);
        let line = 1 + self.0.partition_point(|&nl| nl < offset);
        u32::try_from(line).unwrap_or(u32::MAX)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Field {
    Name,
    Value,
    Final,
}

impl Field {
    fn tag(self) -> &'static str {
        match self {
            Field::Name => "name",
            Field::Value => "value",
            Field::Final => "final",
        }
    }
}

/// A `<property>` being read.
struct Builder {
    line: u32,
    name: Option<String>,
    value: Option<String>,
    is_final: Option<String>,
}

impl Builder {
    fn slot(&mut self, field: Field) -> &mut Option<String> {
        match field {
            Field::Name => &mut self.name,
            Field::Value => &mut self.value,
            Field::Final => &mut self.is_final,
        }
    }
}

/// Where the reader is in the document.
enum Place {
    /// Before the root element.
    Prolog,
    /// Inside `<configuration>`, opened on this line.
    Root(u32),
    /// After `</configuration>`.
    Epilog,
}

struct Parser<'a> {
    file: &'a Path,
    lines: Lines,
    /// The properties read so far.
    out: Vec<Parsed>,
    place: Place,
    prop: Option<Builder>,
    /// The field being read, its text so far, and where it started.
    field: Option<(Field, String, u64)>,
    /// > 0 while inside an ignored element (and how deep).
    skip: usize,
    /// Every element open now, with the line it opened on, so that a mismatched end tag
    /// names where the element that was not closed began.
    open: Vec<(String, u32)>,
}

impl Parser<'_> {
    fn err(&self, offset: u64, message: impl Into<String>) -> ConfigError {
        ConfigError::Xml {
            file: self.file.to_path_buf(),
            line: self.lines.line(offset),
            message: message.into(),
        }
    }

    fn err_at_line(&self, line: u32, message: impl Into<String>) -> ConfigError {
        ConfigError::Xml {
            file: self.file.to_path_buf(),
            line,
            message: message.into(),
        }
    }

    /// The tag's name, with its attributes checked for well-formedness (their values are
    /// not used).
    fn tag_name(&self, e: &BytesStart<'_>, offset: u64) -> Result<String, ConfigError> {
        for attr in e.attributes() {
            attr.map_err(|err| self.err(offset, format!("malformed XML: {err}")))?;
        }
        Ok(String::from_utf8_lossy(e.name().as_ref()).into_owned())
    }
}

/// Parses a whole document. Nothing is returned unless the whole document is good.
pub(super) fn parse(file: &Path, text: &str) -> Result<Vec<Parsed>, ConfigError> {
    let mut p = Parser {
        file,
        lines: Lines::new(text),
        out: Vec::new(),
        place: Place::Prolog,
        prop: None,
        field: None,
        skip: 0,
        open: Vec::new(),
    };
    let mut reader = Reader::from_str(text);
    let config = reader.config_mut();
    config.check_end_names = true;
    config.expand_empty_elements = false;
    config.trim_text(false);

    loop {
        let offset = reader.buffer_position();
        let event = reader.read_event().map_err(|e| {
            let mut message = format!("malformed XML: {e}");
            if let quick_xml::Error::IllFormed(IllFormedError::MismatchedEndTag { .. }) = &e {
                if let Some((tag, line)) = p.open.last() {
                    message.push_str(&format!("; <{tag}> opened on line {line} is not closed"));
                }
            }
            p.err(reader.error_position(), message)
        })?;
        match &event {
            Event::Start(e) => p.open.push((
                String::from_utf8_lossy(e.name().as_ref()).into_owned(),
                p.lines.line(offset),
            )),
            Event::End(_) => {
                p.open.pop();
            }
            _ => {}
        }
        match event {
            Event::Start(ref e) => p.on_start(e, false, offset)?,
            Event::Empty(ref e) => p.on_start(e, true, offset)?,
            Event::End(_) => p.on_end(offset)?,
            Event::Text(t) => {
                let raw = std::str::from_utf8(&t).map_err(|_| p.err(offset, "not valid UTF-8"))?;
                let text = unescape(raw).map_err(|(at, msg)| p.err(offset + at as u64, msg))?;
                p.on_text(raw, &text, offset)?;
            }
            Event::CData(c) => p.on_cdata(&c, offset)?,
            Event::DocType(_) => {
                // Skipped unread: no DTD is fetched and no declared entity is honoured.
                if !matches!(p.place, Place::Prolog) {
                    return Err(p.err(offset, "malformed XML: <!DOCTYPE> after the root element"));
                }
            }
            Event::Comment(_) | Event::PI(_) | Event::Decl(_) => {}
            Event::Eof => break,
        }
    }
    p.at_end(text.len() as u64)
}

impl Parser<'_> {
    /// A start tag (or an empty element, `is_empty`).
    fn on_start(
        &mut self,
        e: &BytesStart<'_>,
        is_empty: bool,
        offset: u64,
    ) -> Result<(), ConfigError> {
        let tag = self.tag_name(e, offset)?;
        if self.skip == 0 && tag == "property" {
            if let Some(b) = &self.prop {
                // Not an unknown element to skip: the property before it was
                // never closed.
                return Err(self.err(
                    offset,
                    format!(
                        "<property> opened on line {} is not closed before the next <property>",
                        b.line
                    ),
                ));
            }
        }
        if self.skip > 0 {
            self.skip += usize::from(!is_empty);
            return Ok(());
        }
        if let Some((f, _, start)) = &self.field {
            let mut message = format!("unexpected element <{tag}> inside <{}>", f.tag());
            let opened = self.lines.line(*start);
            if opened != self.lines.line(offset) {
                // Most likely the field was never closed: say where it began.
                message.push_str(&format!(
                    "; <{}> opened on line {opened} is not closed",
                    f.tag()
                ));
            }
            return Err(self.err(offset, message));
        }
        if self.prop.is_some() {
            return self.on_field(&tag, is_empty, offset);
        }
        match self.place {
            Place::Prolog if tag == "configuration" => {
                self.place = if is_empty {
                    Place::Epilog
                } else {
                    Place::Root(self.lines.line(offset))
                };
            }
            Place::Prolog => {
                return Err(self.err(
                    offset,
                    format!("the top-level element must be <configuration>, not <{tag}>"),
                ))
            }
            Place::Epilog => {
                return Err(self.err(offset, format!("element <{tag}> after </configuration>")))
            }
            Place::Root(_) if tag == "property" => {
                let line = self.lines.line(offset);
                if is_empty {
                    return Err(self.err_at_line(line, "property without <name>"));
                }
                self.prop = Some(Builder {
                    line,
                    name: None,
                    value: None,
                    is_final: None,
                });
            }
            Place::Root(_) if tag == "include" || tag.ends_with(":include") => {
                return Err(self.err(
                    offset,
                    format!("<{tag}> (XInclude) is not supported; put the properties in this file or in one of the files Spindle reads"),
                ))
            }
            // Unknown elements are ignored with everything inside them.
            Place::Root(_) => self.skip = usize::from(!is_empty),
        }
        Ok(())
    }

    /// An element inside `<property>`.
    fn on_field(&mut self, tag: &str, is_empty: bool, offset: u64) -> Result<(), ConfigError> {
        let f = match tag {
            "name" => Field::Name,
            "value" => Field::Value,
            "final" => Field::Final,
            // <description>, <source>, <tag> and anything unknown.
            _ => {
                self.skip = usize::from(!is_empty);
                return Ok(());
            }
        };
        let Some(b) = &mut self.prop else {
            return Ok(());
        };
        if b.slot(f).is_some() {
            return Err(self.err(offset, format!("property has more than one <{}>", f.tag())));
        }
        if is_empty {
            *b.slot(f) = Some(String::new());
        } else {
            self.field = Some((f, String::new(), offset));
        }
        Ok(())
    }

    fn on_end(&mut self, offset: u64) -> Result<(), ConfigError> {
        if self.skip > 0 {
            self.skip -= 1;
        } else if let Some((f, text, _)) = self.field.take() {
            if let Some(b) = &mut self.prop {
                *b.slot(f) = Some(text);
            }
        } else if let Some(b) = self.prop.take() {
            if let Some(parsed) = finish(self, b)? {
                self.out.push(parsed);
            }
        } else if let Place::Root(_) = self.place {
            self.place = Place::Epilog;
        } else {
            // quick-xml reports unmatched end tags itself; this is a safety net.
            return Err(self.err(offset, "malformed XML: unexpected end tag"));
        }
        Ok(())
    }

    /// Text, as written (`raw`) and unescaped.
    fn on_text(&mut self, raw: &str, text: &str, offset: u64) -> Result<(), ConfigError> {
        if self.skip > 0 {
            return Ok(());
        }
        if let Some((_, buf, _)) = &mut self.field {
            buf.push_str(text);
        } else if !matches!(self.place, Place::Root(_)) && !text.trim().is_empty() {
            return Err(self.err(
                offset + (raw.len() - raw.trim_start().len()) as u64,
                "text outside <configuration>",
            ));
        }
        Ok(())
    }

    fn on_cdata(&mut self, c: &[u8], offset: u64) -> Result<(), ConfigError> {
        if self.skip > 0 {
            return Ok(());
        }
        if self.field.is_some() {
            let s = std::str::from_utf8(c).map_err(|_| self.err(offset, "not valid UTF-8"))?;
            if let Some((_, buf, _)) = &mut self.field {
                buf.push_str(s);
            }
        } else if !matches!(self.place, Place::Root(_)) {
            return Err(self.err(offset, "text outside <configuration>"));
        }
        Ok(())
    }

    /// The properties read, once the document ended (at byte `end`) with nothing open.
    fn at_end(self, end: u64) -> Result<Vec<Parsed>, ConfigError> {
        if let Some((f, _, start)) = &self.field {
            return Err(self.err(
                end,
                format!(
                    "unexpected end of file: <{}> opened on line {} is not closed",
                    f.tag(),
                    self.lines.line(*start)
                ),
            ));
        }
        if let Some(b) = &self.prop {
            return Err(self.err(
                end,
                format!(
                    "unexpected end of file: <property> opened on line {} is not closed",
                    b.line
                ),
            ));
        }
        match self.place {
            Place::Epilog => Ok(self.out),
            Place::Root(line) => Err(self.err(
                end,
                format!(
                    "unexpected end of file: <configuration> opened on line {line} is not closed"
                ),
            )),
            Place::Prolog => {
                Err(self.err(end, "no <configuration> element (empty or truncated file?)"))
            }
        }
    }
}

/// Checks a finished `<property>`: None when it has no `<value>` (Hadoop skips those).
fn finish(p: &Parser<'_>, b: Builder) -> Result<Option<Parsed>, ConfigError> {
    let name = match b.name.as_deref().map(str::trim) {
        None => return Err(p.err_at_line(b.line, "property without <name>")),
        Some("") => return Err(p.err_at_line(b.line, "property with an empty <name>")),
        Some(n) => n.to_string(),
    };
    let is_final = match b.is_final.as_deref().map(str::trim) {
        None | Some("") => false,
        Some(f) if f.eq_ignore_ascii_case("true") => true,
        Some(f) if f.eq_ignore_ascii_case("false") => false,
        Some(f) => {
            return Err(ConfigError::BadValue {
                file: p.file.to_path_buf(),
                line: b.line,
                name,
                expected: "<final> to be true or false".to_string(),
                value: f.to_string(),
            })
        }
    };
    Ok(b.value.map(|value| Parsed {
        name,
        value,
        is_final,
        line: b.line,
    }))
}

/// Expands `&lt; &gt; &amp; &apos; &quot;` and `&#N;` / `&#xN;`. Any other reference is an
/// error (`(byte offset in raw, message)`): documents may declare entities in a DTD, and
/// honouring those is how XML files leak other files or explode in size.
fn unescape(raw: &str) -> Result<std::borrow::Cow<'_, str>, (usize, String)> {
    if !raw.contains('&') {
        return Ok(raw.into());
    }
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    let mut base = 0;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        let after = &rest[amp + 1..];
        let at = base + amp;
        let semi = after
            .find(|c: char| c == ';' || c == '&' || c == '<' || c.is_whitespace())
            .filter(|&i| after.as_bytes()[i] == b';')
            .ok_or_else(|| {
                (
                    at,
                    "'&' that does not start an entity reference (write &amp;)".to_string(),
                )
            })?;
        let entity = &after[..semi];
        let c = match entity {
            "lt" => '<',
            "gt" => '>',
            "amp" => '&',
            "apos" => '\'',
            "quot" => '"',
            _ => match entity.strip_prefix('#') {
                Some(num) => char_ref(num).ok_or_else(|| {
                    (at, format!("invalid character reference '&{entity};'"))
                })?,
                None => {
                    return Err((
                        at,
                        format!(
                            "undefined entity '&{entity};' (only &lt; &gt; &amp; &apos; &quot; and numeric character references are allowed; DTD entities are never expanded)"
                        ),
                    ))
                }
            },
        };
        out.push(c);
        rest = &after[semi + 1..];
        base = at + 1 + semi + 1;
    }
    out.push_str(rest);
    Ok(out.into())
}

/// `#65` / `#x41` (without the `#`) -> a character XML allows.
fn char_ref(num: &str) -> Option<char> {
    let code = match num.strip_prefix('x') {
        Some(hex) if !hex.is_empty() && hex.chars().all(|c| c.is_ascii_hexdigit()) => {
            u32::from_str_radix(hex, 16).ok()?
        }
        None if !num.is_empty() && num.chars().all(|c| c.is_ascii_digit()) => num.parse().ok()?,
        _ => return None,
    };
    let c = char::from_u32(code)?;
    let allowed = matches!(c, '\t' | '\n' | '\r') || (c >= ' ' && !matches!(code, 0xFFFE | 0xFFFF));
    allowed.then_some(c)
}
