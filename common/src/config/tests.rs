use std::path::{Path, PathBuf};

use proptest::prelude::*;

use super::*;

/// A document with one property per `(name, value)` on lines 2, 3, ...
fn doc(props: &[(&str, &str)]) -> String {
    let mut s = String::from("<configuration>\n");
    for (n, v) in props {
        s.push_str(&format!(
            "<property><name>{n}</name><value>{v}</value></property>\n"
        ));
    }
    s.push_str("</configuration>\n");
    s
}

fn parse(xml: &str) -> Result<Configuration, ConfigError> {
    let mut c = Configuration::new().with_env([("USER", "alice"), ("HOME", "/home/alice")]);
    c.add_str(Path::new("test.xml"), xml)?;
    Ok(c)
}

fn conf(props: &[(&str, &str)]) -> Configuration {
    match parse(&doc(props)) {
        Ok(c) => c,
        Err(e) => panic!("test document did not parse: {e}"),
    }
}

fn xml_err(xml: &str) -> (u32, String) {
    match parse(xml) {
        Err(ConfigError::Xml { line, message, .. }) => (line, message),
        other => panic!("expected an XML error, got {other:?}"),
    }
}

fn expansion_err(c: &Configuration, name: &str) -> ConfigError {
    match c.get(name) {
        Err(e @ ConfigError::Expansion { .. }) => e,
        other => panic!("expected an expansion error, got {other:?}"),
    }
}

// ---- layering and final ------------------------------------------------------------

#[test]
fn later_resources_override_earlier_ones() {
    let mut c = conf(&[("a", "1"), ("b", "1")]);
    c.add_str(Path::new("second.xml"), &doc(&[("a", "2")]))
        .unwrap();
    assert_eq!(c.get_raw("a"), Some("2"));
    assert_eq!(c.get_raw("b"), Some("1"));
    assert_eq!(
        c.source("a"),
        Some(&Source {
            file: PathBuf::from("second.xml"),
            line: 2
        })
    );
    assert_eq!(c.source("b").map(|s| s.line), Some(3));
}

#[test]
fn within_one_file_the_last_definition_wins() {
    let c = conf(&[("a", "1"), ("a", "2")]);
    assert_eq!(c.get_raw("a"), Some("2"));
    assert_eq!(c.source("a").map(|s| s.line), Some(3));
}

#[test]
fn final_keeps_the_first_definition_and_its_source() {
    let first = "<configuration>\n<property><name>a</name><value>1</value><final>true</final></property>\n</configuration>";
    let mut c = parse(first).unwrap();
    c.add_str(Path::new("later.xml"), &doc(&[("a", "2")]))
        .unwrap();
    c.add_str(
        Path::new("later2.xml"),
        "<configuration><property><name>a</name><value>3</value><final>true</final></property></configuration>",
    )
    .unwrap();
    assert_eq!(c.get_raw("a"), Some("1"));
    assert!(c.is_final("a"));
    assert_eq!(
        c.source("a"),
        Some(&Source {
            file: PathBuf::from("test.xml"),
            line: 2
        })
    );
}

#[test]
fn final_applies_within_the_same_file_and_accepts_case_and_blanks() {
    let c = parse(
        "<configuration>\
         <property><name>a</name><value>1</value><final> TRUE </final></property>\
         <property><name>a</name><value>2</value></property>\
         <property><name>b</name><value>1</value><final/></property>\
         <property><name>b</name><value>2</value></property>\
         </configuration>",
    )
    .unwrap();
    assert_eq!(c.get_raw("a"), Some("1"));
    assert_eq!(c.get_raw("b"), Some("2"));
    assert!(!c.is_final("b"));
}

#[test]
fn final_must_be_true_or_false() {
    let e = parse("<configuration>\n<property><name>a</name><value>1</value><final>yes</final></property></configuration>")
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "test.xml:2: property 'a': expected <final> to be true or false, got 'yes'"
    );
}

#[test]
fn set_overrides_even_final_and_reports_as_commandline() {
    let mut c = parse(
        "<configuration><property><name>n</name><value>1</value><final>true</final></property></configuration>",
    )
    .unwrap();
    c.set("n", "abc");
    assert_eq!(c.get_raw("n"), Some("abc"));
    assert_eq!(c.source("n"), Some(&Source::commandline()));
    assert_eq!(
        c.get_i64("n", 0).unwrap_err().to_string(),
        "-D: property 'n': expected an integer, got 'abc'"
    );
    // Still final against files added afterwards.
    c.add_str(Path::new("x.xml"), &doc(&[("n", "7")])).unwrap();
    assert_eq!(c.get_raw("n"), Some("abc"));
}

#[test]
fn a_broken_file_changes_nothing() {
    let mut c = conf(&[("a", "1")]);
    let broken = "<configuration><property><name>a</name><value>2</value></property><property><value>x</value></property></configuration>";
    assert!(c.add_str(Path::new("bad.xml"), broken).is_err());
    assert_eq!(c.get_raw("a"), Some("1"));
    assert_eq!(c.names().count(), 1);
}

#[test]
fn names_are_sorted_and_filterable_by_prefix() {
    let c = conf(&[
        ("yarn.scheduler.capacity.root.queues", "a"),
        ("yarn.b", "1"),
        ("yarn.scheduler.capacity.root.a.capacity", "100"),
        ("yarn.scheduler.capacityx", "1"),
        ("zzz", "1"),
    ]);
    let cs: Vec<&str> = c
        .names_with_prefix(keys::CAPACITY_SCHEDULER_PREFIX)
        .collect();
    assert_eq!(
        cs,
        [
            "yarn.scheduler.capacity.root.a.capacity",
            "yarn.scheduler.capacity.root.queues"
        ]
    );
    assert_eq!(c.names().count(), 5);
}

// ---- files and directories ---------------------------------------------------------

#[test]
fn load_dir_reads_the_known_files_in_order() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("yarn-site.xml"),
        doc(&[("a", "site"), ("b", "site")]),
    )
    .unwrap();
    std::fs::write(dir.path().join("node-resources.xml"), doc(&[("a", "node")])).unwrap();
    std::fs::write(dir.path().join("other.xml"), doc(&[("c", "other")])).unwrap();
    let c = Configuration::load_dir(dir.path()).unwrap();
    assert_eq!(c.get_raw("a"), Some("node"));
    assert_eq!(c.get_raw("b"), Some("site"));
    assert_eq!(c.get_raw("c"), None, "only CONF_FILES are read");
    assert_eq!(
        c.source("a").map(|s| s.file.clone()),
        Some(dir.path().join("node-resources.xml"))
    );
}

#[test]
fn load_dir_of_an_empty_dir_is_empty() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(
        Configuration::load_dir(dir.path()).unwrap().names().count(),
        0
    );
}

#[test]
fn a_missing_dir_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let e = Configuration::load_dir(&missing).unwrap_err();
    assert!(matches!(&e, ConfigError::Io { file, .. } if *file == missing));
    let text = e.to_string();
    assert!(
        text.starts_with(&format!("{}: ", missing.display())),
        "{text}"
    );
    assert!(text.contains("not found"), "{text}");

    let file = dir.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let e = Configuration::load_dir(&file).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("{}: not a directory", file.display())
    );
}

#[test]
fn a_missing_file_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("yarn-site.xml");
    let e = Configuration::new().add_file(&missing).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("{}: file not found", missing.display())
    );
}

#[test]
fn a_broken_file_in_a_dir_is_reported_with_its_path_and_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("capacity-scheduler.xml"),
        "<configuration>\n\n  <property>\n    <value>1</value>\n  </property>\n</configuration>\n",
    )
    .unwrap();
    let e = Configuration::load_dir(dir.path()).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: property without <name>",
            Location(&dir.path().join("capacity-scheduler.xml"), 3)
        )
    );
}

#[test]
fn non_utf8_and_bom() {
    let mut c = Configuration::new();
    let mut bytes = b"\xEF\xBB\xBF".to_vec();
    bytes.extend_from_slice(doc(&[("a", "1")]).as_bytes());
    c.add_bytes(Path::new("bom.xml"), &bytes).unwrap();
    assert_eq!(c.get_raw("a"), Some("1"));

    let e = c
        .add_bytes(
            Path::new("latin1.xml"),
            b"<configuration>\n<property><name>a</name><value>caf\xe9</value></property></configuration>",
        )
        .unwrap_err();
    assert!(
        e.to_string().starts_with("latin1.xml:2: not valid UTF-8"),
        "{e}"
    );
}

// ---- XML details -------------------------------------------------------------------

#[test]
fn empty_value_source_description_unknown_elements_cdata_and_refs() {
    let c = parse(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<?xml-stylesheet type="text/xsl" href="configuration.xsl"?>
<!-- a comment -->
<configuration xmlns:xi="http://www.w3.org/2001/XInclude">
  <property>
    <name> empty </name>
    <value/>
    <description>Some <b>markup</b> &amp; text</description>
    <source>yarn-site.xml</source>
    <tag>x</tag>
    <on-ambari-upgrade add="true"/>
  </property>
  <property><name>cdata</name><value><![CDATA[<a&b>]]></value></property>
  <property><name>refs</name><value>&lt;&gt;&amp;&apos;&quot;&#65;&#x42;</value></property>
  <property><name>ws</name><value>  spaced
 out </value></property>
  <property><name>novalue</name></property>
  <unknown><property><name>hidden</name><value>1</value></property></unknown>
  stray text is ignored, as Hadoop does
</configuration>
<!-- trailing comment -->
"#,
    )
    .unwrap();
    assert_eq!(c.get_raw("empty"), Some(""));
    assert_eq!(c.get_raw("cdata"), Some("<a&b>"));
    assert_eq!(c.get_raw("refs"), Some("<>&'\"AB"));
    assert_eq!(c.get_raw("ws"), Some("  spaced\n out "));
    assert_eq!(c.get_string("ws", "").unwrap(), "spaced\n out");
    assert_eq!(c.get_raw("novalue"), None);
    assert_eq!(c.get_raw("hidden"), None);
    assert_eq!(c.source("empty").map(|s| s.line), Some(5));
}

#[test]
fn an_empty_configuration_is_fine() {
    assert_eq!(parse("<configuration/>").unwrap().names().count(), 0);
    assert_eq!(
        parse("<configuration>\n</configuration>")
            .unwrap()
            .names()
            .count(),
        0
    );
}

#[test]
fn truncated_file() {
    let (line, msg) = xml_err("<configuration>\n<property>\n<name>a</name>\n<value>1</value>\n");
    assert_eq!(line, 5);
    assert_eq!(
        msg,
        "unexpected end of file: <property> opened on line 2 is not closed"
    );
    let (line, msg) =
        xml_err("<configuration>\n<property><name>a</name><value>1</value></property>\n");
    assert_eq!(line, 3);
    assert!(msg.contains("<configuration> opened on line 1"), "{msg}");
    let (line, msg) = xml_err("<configuration>\n<property>\n<name>a</na");
    assert_eq!(line, 3);
    assert!(msg.starts_with("malformed XML"), "{msg}");
    let (line, msg) = xml_err("<configuration>\n<property>\n<name>abc");
    assert_eq!(line, 3);
    assert!(msg.contains("<name> opened on line 3"), "{msg}");
}

#[test]
fn empty_file_and_wrong_root() {
    let (line, msg) = xml_err("");
    assert_eq!(line, 1);
    assert!(msg.contains("no <configuration>"), "{msg}");
    let (line, msg) = xml_err("\n<conf>\n</conf>");
    assert_eq!(line, 2);
    assert!(msg.contains("must be <configuration>"), "{msg}");
    let (line, msg) = xml_err("<configuration/>\n<configuration/>");
    assert_eq!(line, 2);
    assert!(msg.contains("after </configuration>"), "{msg}");
    let (line, msg) = xml_err("<configuration/>\n\n junk");
    assert_eq!(line, 3);
    assert_eq!(msg, "text outside <configuration>");
}

#[test]
fn mismatched_and_unclosed_tags() {
    let (line, msg) =
        xml_err("<configuration>\n<property>\n<name>a</value>\n</property></configuration>");
    assert_eq!(line, 3);
    assert!(msg.contains("expected `</name>`"), "{msg}");
    let (line, _) = xml_err(
        "<configuration>\n<property>\n<name>a</name>\n<value>b</value\n</property></configuration>",
    );
    assert!(line >= 4, "line {line}");
    let (line, _) = xml_err("<configuration>\n</property>\n</configuration>");
    assert_eq!(line, 2);
}

#[test]
fn property_without_name_or_with_empty_name() {
    let (line, msg) = xml_err("<configuration>\n<property><name>a</name><value>1</value></property>\n\n<property>\n<value>1</value>\n</property>\n</configuration>");
    assert_eq!((line, msg.as_str()), (4, "property without <name>"));
    let (line, msg) = xml_err("<configuration>\n<property/>\n</configuration>");
    assert_eq!((line, msg.as_str()), (2, "property without <name>"));
    let (line, msg) = xml_err(
        "<configuration>\n<property><name>  </name><value>1</value></property></configuration>",
    );
    assert_eq!((line, msg.as_str()), (2, "property with an empty <name>"));
}

#[test]
fn repeated_fields_and_markup_inside_values_are_errors() {
    let (line, msg) = xml_err("<configuration>\n<property><name>a</name>\n<value>1</value>\n<value>2</value></property></configuration>");
    assert_eq!(
        (line, msg.as_str()),
        (4, "property has more than one <value>")
    );
    let (line, msg) = xml_err("<configuration>\n<property><name>a</name><value>1<b>2</b></value></property></configuration>");
    assert_eq!(line, 2);
    assert_eq!(msg, "unexpected element <b> inside <value>");
    // A field left open before the next element: the line it opened on.
    let (line, msg) = xml_err(
        "<configuration>\n<property>\n<name>a\n<value>1</value>\n</property>\n</configuration>",
    );
    assert_eq!(
        (line, msg.as_str()),
        (
            4,
            "unexpected element <value> inside <name>; <name> opened on line 3 is not closed"
        )
    );
}

#[test]
fn doctype_with_external_dtd_is_never_fetched_and_ignored() {
    let c = parse(
        "<?xml version=\"1.0\"?>\n<!DOCTYPE configuration SYSTEM \"http://203.0.113.1/evil.dtd\">\n<configuration>\n<property><name>a</name><value>1</value></property>\n</configuration>",
    )
    .unwrap();
    assert_eq!(c.get_raw("a"), Some("1"));
}

#[test]
fn external_entities_are_refused_with_the_line() {
    let xml = "<?xml version=\"1.0\"?>\n<!DOCTYPE configuration [\n  <!ENTITY xxe SYSTEM \"file:///etc/passwd\">\n]>\n<configuration>\n<property>\n<name>a</name>\n<value>&xxe;</value>\n</property>\n</configuration>";
    let (line, msg) = xml_err(xml);
    assert_eq!(line, 8);
    assert!(msg.starts_with("undefined entity '&xxe;'"), "{msg}");
}

#[test]
fn unknown_entities_bare_ampersands_and_bad_char_refs() {
    let (line, msg) = xml_err("<configuration>\n<property><name>a</name>\n<value>x &nbsp; y</value></property></configuration>");
    assert_eq!(line, 3);
    assert!(msg.contains("'&nbsp;'"), "{msg}");
    let (line, msg) = xml_err("<configuration>\n<property><name>a</name>\n\n<value>a & b</value></property></configuration>");
    assert_eq!(line, 4);
    assert!(msg.contains("write &amp;"), "{msg}");
    let (line, msg) = xml_err(
        "<configuration>\n<property><name>a</name><value>&#0;</value></property></configuration>",
    );
    assert_eq!(line, 2);
    assert!(msg.contains("invalid character reference"), "{msg}");
    // Also in text that is otherwise ignored: it is still not well-formed.
    let (line, _) = xml_err("<configuration>\n<property><name>a</name><value>1</value>\n<description>&foo;</description></property></configuration>");
    assert_eq!(line, 3);
}

#[test]
fn xinclude_is_refused() {
    let (line, msg) = xml_err("<configuration xmlns:xi=\"http://www.w3.org/2001/XInclude\">\n<xi:include href=\"other.xml\"/>\n</configuration>");
    assert_eq!(line, 2);
    assert!(msg.contains("not supported"), "{msg}");
}

#[test]
fn errors_display_on_one_line() {
    let c = parse(
        "<configuration>\n<property><name>n</name><value>1\n2</value></property></configuration>",
    )
    .unwrap();
    let e = c.get_u64("n", 0).unwrap_err();
    assert_eq!(
        e.to_string(),
        "test.xml:2: property 'n': expected a non-negative integer, got '1\\n2'"
    );
    let long = "9".repeat(1000) + "x";
    let c = conf(&[("n", &long)]);
    let text = c.get_i64("n", 0).unwrap_err().to_string();
    assert!(text.len() < 300 && text.ends_with("...'"), "{text}");
    assert!(!text.contains('\n'));
}

// ---- expansion ---------------------------------------------------------------------

#[test]
fn property_references_expand_recursively() {
    let c = conf(&[
        ("base", "/data"),
        ("dir", "${base}/yarn"),
        ("dirs", "${dir}/a, ${dir}/b"),
    ]);
    assert_eq!(
        c.get("dirs").unwrap().as_deref(),
        Some("/data/yarn/a, /data/yarn/b")
    );
    assert_eq!(
        c.get_strings("dirs").unwrap(),
        ["/data/yarn/a", "/data/yarn/b"]
    );
    // Stored verbatim.
    assert_eq!(c.get_raw("dir"), Some("${base}/yarn"));
    assert_eq!(c.get("unset").unwrap(), None);
}

#[test]
fn unresolvable_references_stay_verbatim_and_the_rest_expands() {
    let c = conf(&[
        ("a", "${nope}/${b}/${env.SPINDLE_TEST_UNSET_VAR}"),
        ("b", "x"),
        ("odd", "${} ${a b} $x ${"),
    ]);
    assert_eq!(
        c.get("a").unwrap().as_deref(),
        Some("${nope}/x/${env.SPINDLE_TEST_UNSET_VAR}")
    );
    assert_eq!(c.get("odd").unwrap().as_deref(), Some("${} ${a b} $x ${"));
}

#[test]
fn builtin_system_properties() {
    let c = conf(&[
        ("u", "${user.name}"),
        ("h", "${user.home}"),
        ("t", "${java.io.tmpdir}"),
        // Hadoop consults system properties before the configuration.
        ("user.name", "mallory"),
    ]);
    assert_eq!(c.get("u").unwrap().as_deref(), Some("alice"));
    assert_eq!(c.get("h").unwrap().as_deref(), Some("/home/alice"));
    assert_eq!(c.get("t").unwrap().as_deref(), Some("/tmp"));
}

#[test]
fn user_name_falls_back_to_the_os_account() {
    let mut c = Configuration::new().with_env([("USER", "")]);
    c.add_str(Path::new("t.xml"), &doc(&[("u", "${user.name}")]))
        .unwrap();
    let u = c.get("u").unwrap().unwrap_or_default();
    assert!(!u.is_empty() && u != "${user.name}", "{u}");
}

#[test]
fn references_to_unset_keys_use_builtin_defaults() {
    let c = conf(&[("x", "${hadoop.tmp.dir}/x")]);
    assert_eq!(c.get("x").unwrap().as_deref(), Some("/tmp/hadoop-alice/x"));
    assert_eq!(
        c.get_string(
            keys::SPINDLE_RM_STATE_STORE_PATH,
            keys::DEFAULT_SPINDLE_RM_STATE_STORE_PATH
        )
        .unwrap(),
        "/tmp/hadoop-alice/yarn/system/rmstore.sqlite"
    );
    assert_eq!(
        c.get_string(keys::RM_WEBAPP_ADDRESS, keys::DEFAULT_RM_WEBAPP_ADDRESS)
            .unwrap(),
        "0.0.0.0:8088"
    );
    // A configured value beats the default in references too.
    let c = conf(&[
        ("hadoop.tmp.dir", "/var/spindle"),
        (keys::RM_HOSTNAME, "rm1"),
    ]);
    assert_eq!(
        c.get_string(keys::NM_LOCAL_DIRS, keys::DEFAULT_NM_LOCAL_DIRS)
            .unwrap(),
        "/var/spindle/nm-local-dir"
    );
    assert_eq!(
        c.get_string(keys::RM_WEBAPP_ADDRESS, keys::DEFAULT_RM_WEBAPP_ADDRESS)
            .unwrap(),
        "rm1:8088"
    );
    // get() itself does not invent values for unset keys.
    assert_eq!(c.get(keys::NM_LOCAL_DIRS).unwrap(), None);
}

#[test]
fn environment_references() {
    let props = [
        ("plain", "${env.SET}"),
        ("plain_unset", "${env.UNSET}"),
        ("colon_set", "${env.SET:-d}"),
        ("colon_empty", "${env.EMPTY:-d}"),
        ("colon_unset", "${env.UNSET:-d}"),
        ("dash_set", "${env.SET-d}"),
        ("dash_empty", "${env.EMPTY-d}"),
        ("dash_unset", "${env.UNSET-d}"),
        ("empty_default", "[${env.UNSET:-}]"),
        ("nested_default", "${env.UNSET:-${base}}/x"),
        ("base", "/b"),
        ("env_expands", "${env.REF}"),
        ("path", "${env.SPINDLE_WORK_DIR:-/tmp/spindle}/nm-local-dir"),
    ];
    let mut c = Configuration::new().with_env([("SET", "v"), ("EMPTY", ""), ("REF", "${base}!")]);
    c.add_str(Path::new("t.xml"), &doc(&props)).unwrap();
    let get = |n: &str| c.get(n).unwrap().unwrap_or_default();
    assert_eq!(get("plain"), "v");
    assert_eq!(get("plain_unset"), "${env.UNSET}");
    assert_eq!(get("colon_set"), "v");
    assert_eq!(get("colon_empty"), "d");
    assert_eq!(get("colon_unset"), "d");
    assert_eq!(get("dash_set"), "v");
    assert_eq!(get("dash_empty"), "");
    assert_eq!(get("dash_unset"), "d");
    assert_eq!(get("empty_default"), "[]");
    assert_eq!(get("nested_default"), "/b/x");
    assert_eq!(get("env_expands"), "/b!");
    assert_eq!(get("path"), "/tmp/spindle/nm-local-dir");

    let c = c.with_env([("SPINDLE_WORK_DIR", "/w")]);
    assert_eq!(c.get("path").unwrap().as_deref(), Some("/w/nm-local-dir"));
}

#[test]
fn an_unset_env_reference_falls_back_to_a_property_of_that_name() {
    let c = conf(&[("env.FOO", "from-conf"), ("a", "${env.FOO}")]);
    assert_eq!(c.get("a").unwrap().as_deref(), Some("from-conf"));
}

#[test]
fn process_environment_is_used_by_default() {
    // PATH is set for every test process; no variable is modified here.
    let mut c = Configuration::new();
    c.add_str(Path::new("t.xml"), &doc(&[("p", "${env.PATH}")]))
        .unwrap();
    let expected = std::env::var("PATH").unwrap_or_default();
    if !expected.is_empty() && !expected.contains("${") {
        assert_eq!(c.get("p").unwrap(), Some(expected));
    }
}

/// `p0 = ${p1}`, ..., `p{n-1} = ${pn}`, `pn = end`.
fn chain(n: usize) -> Configuration {
    let names: Vec<String> = (0..=n).map(|i| format!("p{i}")).collect();
    let values: Vec<String> = (0..=n)
        .map(|i| {
            if i == n {
                "end".to_string()
            } else {
                format!("${{p{}}}", i + 1)
            }
        })
        .collect();
    let props: Vec<(&str, &str)> = names
        .iter()
        .zip(&values)
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    conf(&props)
}

#[test]
fn twenty_nested_references_are_allowed_and_twenty_one_are_not() {
    assert_eq!(chain(MAX_SUBST).get("p0").unwrap().as_deref(), Some("end"));
    let c = chain(MAX_SUBST + 1);
    let e = expansion_err(&c, "p0");
    let text = e.to_string();
    assert!(
        text.starts_with("test.xml:2: property 'p0': variable substitution depth too large"),
        "{text}"
    );
    // Reading from further down the chain is within the bound again.
    assert_eq!(c.get("p1").unwrap().as_deref(), Some("end"));
    // Typed getters report it too.
    assert!(matches!(
        c.get_u64("p0", 0),
        Err(ConfigError::Expansion { .. })
    ));
}

#[test]
fn many_references_in_one_value_are_fine() {
    let list = vec!["${d}/x"; 50].join(",");
    let c = conf(&[("d", "/data"), ("dirs", &list)]);
    assert_eq!(c.get_strings("dirs").unwrap().len(), 50);
}

#[test]
fn cycles_are_errors_naming_the_property() {
    let c = conf(&[
        ("a", "${b}"),
        ("b", "${a}"),
        ("self", "x${self}"),
        ("c", "1${a}"),
    ]);
    let e = expansion_err(&c, "a");
    assert_eq!(
        e,
        ConfigError::Expansion {
            file: PathBuf::from("test.xml"),
            line: 2,
            name: "a".to_string(),
            message: "reference cycle a -> b -> a (a value may not refer back to itself)"
                .to_string()
        }
    );
    assert!(expansion_err(&c, "self")
        .to_string()
        .starts_with("test.xml:4: property 'self': reference cycle self -> self"));
    assert!(expansion_err(&c, "c")
        .to_string()
        .contains("c -> a -> b -> a"));
    assert!(matches!(
        c.get_string("a", ""),
        Err(ConfigError::Expansion { .. })
    ));
}

#[test]
fn cycles_through_the_environment_are_caught() {
    let mut c = Configuration::new().with_env([("LOOP", "${env.LOOP}")]);
    c.add_str(Path::new("t.xml"), &doc(&[("a", "${env.LOOP}")]))
        .unwrap();
    assert!(c
        .get("a")
        .unwrap_err()
        .to_string()
        .contains("env.LOOP -> env.LOOP"));
}

#[test]
fn exponential_expansion_is_cut_off() {
    let mut props = vec![("l0".to_string(), "x".repeat(64))];
    for i in 1..=MAX_SUBST {
        props.push((
            format!("l{i}"),
            format!("${{l{0}}}${{l{0}}}${{l{0}}}", i - 1),
        ));
    }
    let refs: Vec<(&str, &str)> = props
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let c = conf(&refs);
    let e = expansion_err(&c, &format!("l{MAX_SUBST}"));
    assert!(e.to_string().contains("longer than"), "{e}");
    // A modest level still works.
    assert_eq!(c.get("l2").unwrap().map(|v| v.len()), Some(64 * 9));
}

#[test]
fn a_default_that_fails_to_expand_is_reported_as_a_default() {
    let c = conf(&[("a", "${a}")]);
    let e = c.get_string("unset", "${a}").unwrap_err();
    assert!(
        e.to_string()
            .starts_with("<default>: property 'unset': reference cycle"),
        "{e}"
    );
}

// ---- typed getters -----------------------------------------------------------------

#[test]
fn integers() {
    let c = conf(&[
        ("n", " 42 "),
        ("neg", "-7"),
        ("hex", "0x1F"),
        ("plus", "+3"),
        ("bad", "abc"),
        ("big", "99999999999999999999"),
        ("port", "8088"),
        ("bigport", "70000"),
        ("frac", "1.5"),
        ("one", "1"),
        ("ref", "${one}0"),
    ]);
    assert_eq!(c.get_i64("n", 0).unwrap(), 42);
    assert_eq!(c.get_i64("neg", 0).unwrap(), -7);
    assert_eq!(c.get_i64("hex", 0).unwrap(), 31);
    assert_eq!(c.get_i64("plus", 0).unwrap(), 3);
    assert_eq!(c.get_i64("ref", 0).unwrap(), 10);
    assert_eq!(c.get_i64("unset", 5).unwrap(), 5);
    assert_eq!(c.get_i32("n", 0).unwrap(), 42);
    assert_eq!(c.get_u32("n", 0).unwrap(), 42);
    assert_eq!(c.get_u16("port", 0).unwrap(), 8088);
    assert_eq!(c.get_u64("n", 0).unwrap(), 42);
    assert_eq!(
        c.get_i64("bad", 0).unwrap_err().to_string(),
        "test.xml:6: property 'bad': expected an integer, got 'abc'"
    );
    assert_eq!(
        c.get_i64("big", 0).unwrap_err(),
        ConfigError::BadValue {
            file: PathBuf::from("test.xml"),
            line: 7,
            name: "big".to_string(),
            expected: "an integer".to_string(),
            value: "99999999999999999999".to_string(),
        }
    );
    assert!(c.get_i64("frac", 0).is_err());
    assert!(c
        .get_u64("neg", 0)
        .unwrap_err()
        .to_string()
        .ends_with("expected a non-negative integer, got '-7'"));
    assert!(c
        .get_u16("bigport", 0)
        .unwrap_err()
        .to_string()
        .ends_with("expected an integer from 0 to 65535, got '70000'"));
}

#[test]
fn empty_values_are_not_numbers() {
    let c = parse("<configuration>\n<property><name>n</name><value/></property></configuration>")
        .unwrap();
    assert_eq!(
        c.get_i64("n", 1).unwrap_err().to_string(),
        "test.xml:2: property 'n': expected an integer, got ''"
    );
    assert_eq!(c.get_string("n", "dflt").unwrap(), "");
    assert_eq!(c.get_nonempty("n").unwrap(), None);
    assert_eq!(c.get_strings("n").unwrap(), Vec::<String>::new());
}

#[test]
fn floats() {
    let c = conf(&[
        ("a", "12.5"),
        ("b", "70"),
        ("nan", "NaN"),
        ("inf", "inf"),
        ("x", "12.5%"),
    ]);
    assert_eq!(c.get_f64("a", 0.0).unwrap(), 12.5);
    assert_eq!(c.get_f64("b", 0.0).unwrap(), 70.0);
    assert_eq!(c.get_f64("unset", 0.25).unwrap(), 0.25);
    for bad in ["nan", "inf", "x"] {
        assert!(c
            .get_f64(bad, 0.0)
            .unwrap_err()
            .to_string()
            .contains("expected a number"));
    }
}

#[test]
fn booleans() {
    let c = conf(&[("t", " TRUE "), ("f", "False"), ("y", "yes"), ("one", "1")]);
    assert!(c.get_bool("t", false).unwrap());
    assert!(!c.get_bool("f", true).unwrap());
    assert!(c.get_bool("unset", true).unwrap());
    assert_eq!(
        c.get_bool("y", false).unwrap_err().to_string(),
        "test.xml:4: property 'y': expected a boolean (true or false), got 'yes'"
    );
    assert!(c.get_bool("one", false).is_err());
}

#[test]
fn durations() {
    let cases = [
        ("1500", 1500),
        ("500ms", 500),
        ("500MS", 500),
        ("10s", 10_000),
        ("5m", 300_000),
        ("2h", 7_200_000),
        ("1d", 86_400_000),
        ("1D", 86_400_000),
        ("2500us", 2),
        ("3000000ns", 3),
        (" 7s ", 7000),
        ("0", 0),
    ];
    for (text, ms) in cases {
        let c = conf(&[("d", text)]);
        assert_eq!(c.get_duration_ms("d", 0).unwrap(), ms, "{text}");
    }
    for bad in [
        "1.5s",
        "10 s",
        "-1s",
        "s",
        "10sec",
        "10x",
        "",
        "99999999999999999999d",
        "300000000000000d",
    ] {
        let c = conf(&[("d", bad)]);
        let e = c.get_duration_ms("d", 0).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "test.xml:2: property 'd': expected a duration such as 500ms, 10s, 5m, 2h or 1d, got '{}'",
                bad.trim()
            )
        );
    }
    assert_eq!(Configuration::new().get_duration_ms("d", 9).unwrap(), 9);
}

#[test]
fn sizes() {
    let cases = [
        ("100", 100),
        ("100b", 100),
        ("1k", 1024),
        ("1KB", 1024),
        ("512m", 512 << 20),
        ("512Mb", 512 << 20),
        ("4g", 4 << 30),
        ("4G", 4 << 30),
        ("2t", 2 << 40),
        ("1p", 1 << 50),
        ("1pB", 1 << 50),
    ];
    for (text, bytes) in cases {
        let c = conf(&[("s", text)]);
        assert_eq!(c.get_size_bytes("s", 0).unwrap(), bytes, "{text}");
    }
    for bad in ["1.5g", "4gib", "g", "-1k", "1e3", "99999p", "4 g"] {
        let c = conf(&[("s", bad)]);
        assert_eq!(
            c.get_size_bytes("s", 0).unwrap_err().to_string(),
            format!("test.xml:2: property 's': expected a size such as 512m or 4g, got '{bad}'")
        );
    }
}

#[test]
fn string_lists() {
    let c = conf(&[("l", " a, b ,,c ,"), ("one", "x"), ("blank", "  ")]);
    assert_eq!(c.get_strings("l").unwrap(), ["a", "b", "c"]);
    assert_eq!(c.get_strings("one").unwrap(), ["x"]);
    assert!(c.get_strings("blank").unwrap().is_empty());
    assert!(c.get_strings("unset").unwrap().is_empty());
    assert_eq!(c.get_nonempty("one").unwrap().as_deref(), Some("x"));
    assert_eq!(c.get_nonempty("blank").unwrap(), None);
    assert_eq!(c.get_nonempty("unset").unwrap(), None);
}

// ---- keys --------------------------------------------------------------------------

#[test]
fn defaults_table_agrees_with_the_typed_constants() {
    use keys::*;
    let c = Configuration::new().with_env([("USER", "u")]);
    // Load the table as a file, then read every typed default back through the getters.
    let mut d = c.clone();
    d.add_str(Path::new("defaults.xml"), &doc(DEFAULTS))
        .unwrap();
    let ints: &[(&str, i64)] = &[
        (NM_RESOURCE_MEMORY_MB, DEFAULT_NM_RESOURCE_MEMORY_MB),
        (NM_RESOURCE_CPU_VCORES, DEFAULT_NM_RESOURCE_CPU_VCORES),
        (
            SCHEDULER_MIN_ALLOCATION_MB,
            DEFAULT_SCHEDULER_MIN_ALLOCATION_MB,
        ),
        (
            SCHEDULER_MAX_ALLOCATION_MB,
            DEFAULT_SCHEDULER_MAX_ALLOCATION_MB,
        ),
        (
            SCHEDULER_MIN_ALLOCATION_VCORES,
            DEFAULT_SCHEDULER_MIN_ALLOCATION_VCORES,
        ),
        (
            SCHEDULER_MAX_ALLOCATION_VCORES,
            DEFAULT_SCHEDULER_MAX_ALLOCATION_VCORES,
        ),
        (RM_AM_MAX_ATTEMPTS, DEFAULT_RM_AM_MAX_ATTEMPTS),
        (
            RM_MAX_COMPLETED_APPLICATIONS,
            DEFAULT_RM_MAX_COMPLETED_APPLICATIONS,
        ),
        (
            CLUSTER_MAX_APPLICATION_PRIORITY,
            DEFAULT_CLUSTER_MAX_APPLICATION_PRIORITY,
        ),
        (NM_DELETE_DEBUG_DELAY_SEC, DEFAULT_NM_DELETE_DEBUG_DELAY_SEC),
        (CS_MAXIMUM_APPLICATIONS, DEFAULT_CS_MAXIMUM_APPLICATIONS),
    ];
    for (k, v) in ints {
        assert_eq!(d.get_i64(k, -12345).unwrap(), *v, "{k}");
    }
    let durations: &[(&str, u64)] = &[
        (
            RM_NM_HEARTBEAT_INTERVAL_MS,
            DEFAULT_RM_NM_HEARTBEAT_INTERVAL_MS,
        ),
        (NM_LIVENESS_EXPIRY_MS, DEFAULT_NM_LIVENESS_EXPIRY_MS),
        (AM_LIVENESS_EXPIRY_MS, DEFAULT_AM_LIVENESS_EXPIRY_MS),
        (
            RM_CONTAINER_ALLOCATION_EXPIRY_MS,
            DEFAULT_RM_CONTAINER_ALLOCATION_EXPIRY_MS,
        ),
        (
            NM_SLEEP_DELAY_BEFORE_SIGKILL_MS,
            DEFAULT_NM_SLEEP_DELAY_BEFORE_SIGKILL_MS,
        ),
        (
            NM_CONTAINER_MONITOR_INTERVAL_MS,
            DEFAULT_NM_CONTAINER_MONITOR_INTERVAL_MS,
        ),
        (
            NM_HEALTH_CHECKER_INTERVAL_MS,
            DEFAULT_NM_HEALTH_CHECKER_INTERVAL_MS,
        ),
        (
            NM_HEALTH_CHECKER_SCRIPT_TIMEOUT_MS,
            DEFAULT_NM_HEALTH_CHECKER_SCRIPT_TIMEOUT_MS,
        ),
    ];
    for (k, v) in durations {
        assert_eq!(d.get_duration_ms(k, 12345).unwrap(), *v, "{k}");
    }
    let bools: &[(&str, bool)] = &[
        (ACL_ENABLE, DEFAULT_ACL_ENABLE),
        (NODE_LABELS_ENABLED, DEFAULT_NODE_LABELS_ENABLED),
        (
            RM_SCHEDULER_MONITOR_ENABLE,
            DEFAULT_RM_SCHEDULER_MONITOR_ENABLE,
        ),
        (
            NM_DETECT_HARDWARE_CAPABILITIES,
            DEFAULT_NM_DETECT_HARDWARE_CAPABILITIES,
        ),
        (NM_VMEM_CHECK_ENABLED, DEFAULT_NM_VMEM_CHECK_ENABLED),
        (NM_PMEM_CHECK_ENABLED, DEFAULT_NM_PMEM_CHECK_ENABLED),
    ];
    for (k, v) in bools {
        assert_eq!(d.get_bool(k, !v).unwrap(), *v, "{k}");
    }
    assert_eq!(
        d.get_f64(NM_VMEM_PMEM_RATIO, 0.0).unwrap(),
        DEFAULT_NM_VMEM_PMEM_RATIO
    );
    assert_eq!(
        d.get_f64(CS_MAXIMUM_AM_RESOURCE_PERCENT, 0.0).unwrap(),
        DEFAULT_CS_MAXIMUM_AM_RESOURCE_PERCENT
    );
    // Every default expands cleanly, and no key is listed twice.
    for (k, _) in DEFAULTS {
        d.get(k).unwrap();
        assert_eq!(DEFAULTS.iter().filter(|(o, _)| o == k).count(), 1, "{k}");
    }
    assert_eq!(
        c.get_string(NM_WEBAPP_ADDRESS, DEFAULT_NM_WEBAPP_ADDRESS)
            .unwrap(),
        "0.0.0.0:8042"
    );
}

// ---- robustness --------------------------------------------------------------------

/// Pieces that make documents which get far into the parser and the expander.
fn fragment() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "<configuration>",
        "</configuration>",
        "<property>",
        "</property>",
        "<property/>",
        "<name>",
        "</name>",
        "<value>",
        "</value>",
        "<value/>",
        "<final>true</final>",
        "<description>d</description>",
        "a",
        "b",
        "${a}",
        "${b}",
        "${env.X:-y}",
        "${",
        "}",
        "&amp;",
        "&x;",
        "&#65;",
        "&",
        "<![CDATA[c]]>",
        "<!-- c -->",
        "<!DOCTYPE c>",
        "\n",
        " ",
        "<",
        ">",
        "é",
    ])
}

fn exercise(c: &Configuration) {
    let names: Vec<String> = c.names().map(str::to_string).collect();
    for n in &names {
        let _ = c.get(n);
        let _ = c.get_i64(n, 0);
        let _ = c.get_u16(n, 0);
        let _ = c.get_f64(n, 0.0);
        let _ = c.get_bool(n, false);
        let _ = c.get_duration_ms(n, 0);
        let _ = c.get_size_bytes(n, 0);
        let _ = c.get_strings(n);
        if let Err(e) = c.get(n) {
            assert!(!e.to_string().contains('\n'));
        }
    }
}

proptest! {
    #[test]
    fn arbitrary_bytes_as_a_file_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("yarn-site.xml");
        std::fs::write(&path, &bytes).unwrap();
        let mut c = Configuration::new();
        match c.add_file(&path) {
            Ok(()) => exercise(&c),
            Err(e) => prop_assert!(!e.to_string().contains('\n')),
        }
        let _ = Configuration::load_dir(dir.path());
    }

    #[test]
    fn arbitrary_xml_like_documents_never_panic(parts in prop::collection::vec(fragment(), 0..60)) {
        let mut c = Configuration::new().with_env([("X", "${a}")]);
        match c.add_str(Path::new("p.xml"), &parts.concat()) {
            Ok(()) => exercise(&c),
            Err(e) => prop_assert!(!e.to_string().contains('\n')),
        }
    }

    #[test]
    fn well_formed_properties_round_trip(
        name in "[a-z][a-z0-9.-]{0,20}",
        value in "[ -~]{0,40}",
    ) {
        let escaped = value.replace('&', "&amp;").replace('<', "&lt;");
        let mut c = Configuration::new();
        c.add_str(Path::new("r.xml"), &doc(&[(name.as_str(), escaped.as_str())])).unwrap();
        prop_assert_eq!(c.get_raw(&name), Some(value.as_str()));
        exercise(&c);
    }
}

// ---- known keys and suggestions ---------------------------------------------------------

mod known_keys {
    use super::super::known::{self, key_status, queue_property_status, KeyStatus};
    use super::*;

    fn suggests(name: &str) -> Option<String> {
        match key_status(name) {
            KeyStatus::Unknown { suggestion } => suggestion,
            other => panic!("{name}: expected unknown, got {other:?}"),
        }
    }

    #[test]
    fn the_catalogue_is_read_from_keys_rs() {
        let all: Vec<&str> = known::known_keys().collect();
        for k in [
            keys::HADOOP_TMP_DIR,
            keys::SCHEDULER_MAX_ALLOCATION_MB,
            keys::CS_MAXIMUM_AM_RESOURCE_PERCENT,
            keys::PREEMPTION_INTRA_QUEUE_ENABLED,
            keys::SPINDLE_NM_CGROUPS_DEVICE_ISOLATION,
            keys::NM_NODE_ATTRIBUTES_PROVIDER_FETCH_TIMEOUT_MS,
            keys::RESOURCE_TYPES,
        ] {
            assert!(all.contains(&k), "{k} not read from keys.rs");
            assert_eq!(key_status(k), KeyStatus::Known, "{k}");
        }
        // Every key with a built-in default is a key Spindle knows.
        for (k, _) in keys::DEFAULTS {
            assert_eq!(key_status(k), KeyStatus::Known, "{k}");
        }
        // Defaults, prefixes and per-queue suffixes are not full keys.
        for not_a_key in [
            keys::DEFAULT_CS_RESOURCE_CALCULATOR,
            keys::CAPACITY_SCHEDULER_PREFIX,
            keys::PREEMPTION_PREFIX,
            keys::CS_QUEUE_CAPACITY,
        ] {
            assert!(!all.contains(&not_a_key), "{not_a_key}");
        }
        assert!(all.len() > 100, "only {} keys read", all.len());
        let props: Vec<&str> = known::known_queue_properties().collect();
        for p in [
            keys::CS_QUEUE_QUEUES,
            keys::CS_QUEUE_MAXIMUM_CAPACITY,
            keys::CS_QUEUE_LAS_THRESHOLDS,
            keys::CS_QUEUE_INTRA_QUEUE_DISABLE_PREEMPTION,
            keys::CS_QUEUE_ACCESSIBLE_NODE_LABELS,
            keys::CS_QUEUE_DEFAULT_NODE_LABEL_EXPRESSION,
        ] {
            assert!(props.contains(&p), "{p}");
        }
        assert!(props.iter().all(|p| !p.starts_with("yarn.")), "{props:?}");
    }

    #[test]
    fn distance_counts_edits_and_transpositions() {
        assert_eq!(known::distance("", ""), 0);
        assert_eq!(known::distance("abc", ""), 3);
        assert_eq!(known::distance("kitten", "sitting"), 3);
        assert_eq!(known::distance("capacity", "capcaity"), 1);
        assert_eq!(known::distance("maximum-capacty", "maximum-capacity"), 1);
    }

    #[test]
    fn a_typo_gets_the_closest_known_key() {
        let cases = [
            (
                "yarn.schedular.maximum-allocation-mb",
                "yarn.scheduler.maximum-allocation-mb",
            ),
            (
                "yarn.scheduler.capacity.root.a.maximum-capacty",
                "yarn.scheduler.capacity.root.a.maximum-capacity",
            ),
            (
                "yarn.scheduler.capacity.root.a.b.ordering-policy.las.treshold",
                "yarn.scheduler.capacity.root.a.b.ordering-policy.las.thresholds",
            ),
            (
                "yarn.scheduler.capacity.root.queue",
                "yarn.scheduler.capacity.root.queues",
            ),
            (
                "yarn.scheduler.capacity.root.gpu.accessible-node-labels.h100.capacty",
                "yarn.scheduler.capacity.root.gpu.accessible-node-labels.h100.capacity",
            ),
            (
                "yarn.scheduler.capacity.maximum-am-resource-percnt",
                "yarn.scheduler.capacity.maximum-am-resource-percent",
            ),
            (
                "yarn.scheduler.capacity.user.bob.max-parallel-app",
                "yarn.scheduler.capacity.user.bob.max-parallel-apps",
            ),
            (
                "yarn.resource-types.yarn.io/gpu.maximum-allocaton",
                "yarn.resource-types.yarn.io/gpu.maximum-allocation",
            ),
            (
                "yarn.nodemanager.resource.memory_mb",
                "yarn.nodemanager.resource.memory-mb",
            ),
            (
                "spindle.elastic.resize-intervall-ms",
                "spindle.elastic.resize-interval-ms",
            ),
            // A typo inside an ignored family or another component's namespace still
            // reports when it is one or two edits from a known key.
            ("yarn.nodemanager.local-dir", "yarn.nodemanager.local-dirs"),
            (
                "yarn.resourcemanager.webapp.adress",
                "yarn.resourcemanager.webapp.address",
            ),
            ("hadoop.tmp.dri", "hadoop.tmp.dir"),
        ];
        for (typo, want) in cases {
            assert_eq!(suggests(typo).as_deref(), Some(want), "{typo}");
        }
        // Nothing close: unknown, without a guess.
        assert_eq!(suggests("yarn.frobnicate.everything"), None);
        assert_eq!(suggests("spindle.nonsense"), None);
        assert_eq!(
            suggests("yarn.scheduler.capacity.root.a.zzzzzzzzzzzz"),
            None
        );
    }

    #[test]
    fn shapes_are_known() {
        for k in [
            "yarn.scheduler.capacity.root.queues",
            "yarn.scheduler.capacity.root.a.b.c.capacity",
            "yarn.scheduler.capacity.root.capacity.capacity",
            "yarn.scheduler.capacity.root.gpu.accessible-node-labels",
            "yarn.scheduler.capacity.root.gpu.accessible-node-labels.h100.maximum-capacity",
            "yarn.scheduler.capacity.root.a.ordering-policy.las.promotion-factor",
            "yarn.scheduler.capacity.root.a.ordering-policy.fairshare.max-wait-ms",
            "yarn.scheduler.capacity.root.a.user-settings.alice.weight",
            "spindle.scheduler.fairshare.billing-weights",
            "spindle.scheduler.fairshare.decay-half-life-ms",
            "spindle.scheduler.fairshare.calc-period-ms",
            "yarn.scheduler.capacity.user.max-parallel-apps",
            "yarn.scheduler.capacity.user.alice.max-parallel-apps",
            "yarn.resource-types.yarn.io/gpu.units",
            "yarn.resource-types.license.minimum-allocation",
            "yarn.nodemanager.resource-type.yarn.io/gpu",
            "yarn.resourcemanager.ha.enabled",
            "yarn.resourcemanager.ha.rm-ids",
            "yarn.resourcemanager.ha.id",
            "yarn.resourcemanager.webapp.address.rm1",
            "yarn.resourcemanager.hostname.rm2",
            "spindle.ha.etcd.endpoints",
            "spindle.ha.etcd.lease-ms",
        ] {
            assert_eq!(key_status(k), KeyStatus::Known, "{k}");
        }
    }

    #[test]
    fn other_components_and_unimplemented_yarn_features_are_silent() {
        for k in [
            "fs.defaultFS",
            "mapreduce.framework.name",
            "hadoop.security.authentication",
            "dfs.replication",
            "yarn.nodemanager.aux-services",
            "yarn.nodemanager.aux-services.mapreduce_shuffle.class",
            "yarn.log-aggregation-enable",
            "yarn.timeline-service.enabled",
            "yarn.resourcemanager.ha.automatic-failover.embedded",
            "yarn.resourcemanager.ha.automatic-failover.zk-base-path",
            "yarn.resourcemanager.address",
            "yarn.resourcemanager.webapp.https.address",
            "yarn.nodemanager.resource.percentage-physical-cpu-limit",
            "yarn.scheduler.capacity.schedule-asynchronously.enable",
            "yarn.scheduler.capacity.root.a.reservable",
            "yarn.scheduler.capacity.root.a.leaf-queue-template.capacity",
            "yarn.scheduler.capacity.root.a.accessible-node-labels.x.maximum-am-resource-percent",
            // YARN's other user settings are not read (the weight is).
            "yarn.scheduler.capacity.root.a.user-settings.alice.max-parallel-apps",
        ] {
            assert_eq!(key_status(k), KeyStatus::Ignored, "{k}");
        }
    }

    #[test]
    fn queue_properties_alone() {
        assert_eq!(queue_property_status("capacity"), KeyStatus::Known);
        assert_eq!(
            queue_property_status(" ordering-policy.las.thresholds "),
            KeyStatus::Known
        );
        assert_eq!(
            queue_property_status("accessible-node-labels.h100.capacity"),
            KeyStatus::Known
        );
        assert_eq!(queue_property_status("reservable"), KeyStatus::Ignored);
        assert_eq!(
            queue_property_status("maximum-capacty"),
            KeyStatus::Unknown {
                suggestion: Some("maximum-capacity".into())
            }
        );
        assert_eq!(
            queue_property_status("user-limit-facotr"),
            KeyStatus::Unknown {
                suggestion: Some("user-limit-factor".into())
            }
        );
        assert_eq!(
            queue_property_status("colour"),
            KeyStatus::Unknown { suggestion: None }
        );
    }

    #[test]
    fn unknown_keys_of_a_configuration_name_file_and_line() {
        let xml = "<configuration>\n\
            <property><name>yarn.scheduler.maximum-allocation-mb</name><value>1</value></property>\n\
            <property><name>fs.defaultFS</name><value>hdfs://x</value></property>\n\
            <property><name>yarn.schedular.maximum-allocation-mb</name><value>2</value></property>\n\
            <property><name>yarn.scheduler.capacity.root.a.maximum-capacty</name><value>3</value></property>\n\
            </configuration>\n";
        let mut c = parse(xml).unwrap();
        c.set("spindle.elastic.resize-intervall-ms", "1");
        let u = c.unknown_keys();
        let got: Vec<(String, u32, Option<String>)> = u
            .iter()
            .map(|k| (k.name.clone(), k.source.line, k.suggestion.clone()))
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "spindle.elastic.resize-intervall-ms".to_string(),
                    0,
                    Some("spindle.elastic.resize-interval-ms".to_string())
                ),
                (
                    "yarn.schedular.maximum-allocation-mb".to_string(),
                    4,
                    Some("yarn.scheduler.maximum-allocation-mb".to_string())
                ),
                (
                    "yarn.scheduler.capacity.root.a.maximum-capacty".to_string(),
                    5,
                    Some("yarn.scheduler.capacity.root.a.maximum-capacity".to_string())
                ),
            ]
        );
        assert_eq!(
            u[1].to_string(),
            "test.xml:4: unknown key 'yarn.schedular.maximum-allocation-mb'; did you mean 'yarn.scheduler.maximum-allocation-mb'?"
        );
        let far = parse(&doc(&[("yarn.frobnicate", "1")]))
            .unwrap()
            .unknown_keys();
        assert!(
            far[0]
                .to_string()
                .starts_with("test.xml:2: unknown key 'yarn.frobnicate' (no known key is close"),
            "{}",
            far[0]
        );
    }

    #[test]
    fn the_example_conf_dir_has_no_unknown_key() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../conf");
        let c = Configuration::load_dir(&dir).unwrap();
        assert_eq!(c.unknown_keys(), vec![]);
    }
}

#[test]
fn an_unclosed_element_in_the_middle_names_the_line_it_opened_on() {
    // `<property>` on line 2 is never closed; the next one opens on line 5.
    let xml = "<configuration>\n  <property>\n    <name>a</name>\n    <value>1</value>\n  <property>\n    <name>b</name>\n    <value>2</value>\n  </property>\n</configuration>\n";
    let (line, msg) = xml_err(xml);
    assert_eq!(
        (line, msg.as_str()),
        (
            5,
            "<property> opened on line 2 is not closed before the next <property>"
        )
    );
    // An unclosed element closed by its parent's end tag: the line it opened on.
    let xml = "<configuration>\n<property>\n<name>a</name>\n<value>1</value>\n\n<description>\nx\n</property>\n</configuration>\n";
    let (line, msg) = xml_err(xml);
    assert_eq!(line, 8, "{msg}");
    assert!(
        msg.ends_with("; <description> opened on line 6 is not closed"),
        "{msg}"
    );
    // The whole error, as the daemons print it.
    let e = parse("<configuration>\n<property><name>a</name><value>1</value></property>\n<property>\n<name>b</name>\n</configuration>\n").unwrap_err();
    assert_eq!(
        e.to_string(),
        "test.xml:5: malformed XML: ill-formed document: expected `</property>`, but `</configuration>` was found; <property> opened on line 3 is not closed"
    );
}

/// Keys from real Hadoop configurations (yarn-default.xml, HA and FairScheduler settings,
/// capacity-scheduler.xml of YARN 3, core and MapReduce): none of them is reported, so a file
/// shared with a Hadoop cluster makes no noise.
#[test]
fn real_hadoop_keys_make_no_noise() {
    const REAL: &[&str] = &[
        "yarn.ipc.client.factory.class",
        "yarn.ipc.serializer.type",
        "yarn.ipc.rpc.class",
        "yarn.resourcemanager.hostname",
        "yarn.resourcemanager.address",
        "yarn.resourcemanager.client.thread-count",
        "yarn.am.liveness-monitor.expiry-interval-ms",
        "yarn.resourcemanager.principal",
        "yarn.resourcemanager.scheduler.address",
        "yarn.resourcemanager.scheduler.client.thread-count",
        "yarn.http.policy",
        "yarn.resourcemanager.webapp.address",
        "yarn.resourcemanager.webapp.https.address",
        "yarn.resourcemanager.resource-tracker.address",
        "yarn.acl.enable",
        "yarn.admin.acl",
        "yarn.resourcemanager.admin.address",
        "yarn.resourcemanager.admin.client.thread-count",
        "yarn.resourcemanager.amliveliness-monitor.interval-ms",
        "yarn.resourcemanager.connect.max-wait.ms",
        "yarn.resourcemanager.connect.retry-interval.ms",
        "yarn.resourcemanager.am.max-attempts",
        "yarn.resourcemanager.container.liveness-monitor.interval-ms",
        "yarn.resourcemanager.keytab",
        "yarn.nm.liveness-monitor.expiry-interval-ms",
        "yarn.resourcemanager.nm.liveness-monitor.interval-ms",
        "yarn.resourcemanager.nodes.include-path",
        "yarn.resourcemanager.nodes.exclude-path",
        "yarn.resourcemanager.resource-tracker.client.thread-count",
        "yarn.resourcemanager.scheduler.class",
        "yarn.scheduler.minimum-allocation-mb",
        "yarn.resourcemanager.recovery.enabled",
        "yarn.resourcemanager.store.class",
        "yarn.resourcemanager.state-store.max-completed-applications",
        "yarn.resourcemanager.zk-address",
        "yarn.resourcemanager.zk-num-retries",
        "yarn.resourcemanager.zk-state-store.root-node.acl",
        "yarn.resourcemanager.fs.state-store.uri",
        "yarn.resourcemanager.ha.enabled",
        "yarn.resourcemanager.ha.rm-ids",
        "yarn.resourcemanager.cluster-id",
        "yarn.client.failover-proxy-provider",
        "yarn.client.failover-max-attempts",
        "yarn.resourcemanager.max-completed-applications",
        "yarn.resourcemanager.delayed.delegation-token.removal-interval-ms",
        "yarn.resourcemanager.application-tokens.master-key-rolling-interval-secs",
        "yarn.resourcemanager.container-tokens.master-key-rolling-interval-secs",
        "yarn.resourcemanager.nodemanagers.heartbeat-interval-ms",
        "yarn.resourcemanager.nodemanager.minimum.version",
        "yarn.resourcemanager.scheduler.monitor.enable",
        "yarn.resourcemanager.scheduler.monitor.policies",
        "yarn.resourcemanager.history-writer.multi-threaded-dispatcher.pool-size",
        "yarn.resourcemanager.configuration.provider-class",
        "yarn.nodemanager.hostname",
        "yarn.nodemanager.address",
        "yarn.nodemanager.admin-env",
        "yarn.nodemanager.env-whitelist",
        "yarn.nodemanager.container-executor.class",
        "yarn.nodemanager.container-manager.thread-count",
        "yarn.nodemanager.delete.thread-count",
        "yarn.nodemanager.delete.debug-delay-sec",
        "yarn.nodemanager.keytab",
        "yarn.nodemanager.local-dirs",
        "yarn.nodemanager.local-cache.max-files-per-directory",
        "yarn.nodemanager.localizer.address",
        "yarn.nodemanager.localizer.cache.target-size-mb",
        "yarn.nodemanager.log-dirs",
        "yarn.log-aggregation-enable",
        "yarn.log-aggregation.retain-seconds",
        "yarn.nodemanager.log.retain-seconds",
        "yarn.nodemanager.remote-app-log-dir",
        "yarn.nodemanager.remote-app-log-dir-suffix",
        "yarn.nodemanager.resource.memory-mb",
        "yarn.nodemanager.pmem-check-enabled",
        "yarn.nodemanager.vmem-check-enabled",
        "yarn.nodemanager.vmem-pmem-ratio",
        "yarn.nodemanager.resource.cpu-vcores",
        "yarn.nodemanager.webapp.address",
        "yarn.nodemanager.container-monitor.interval-ms",
        "yarn.nodemanager.container-monitor.resource-calculator.class",
        "yarn.nodemanager.health-checker.interval-ms",
        "yarn.nodemanager.health-checker.script.timeout-ms",
        "yarn.nodemanager.health-checker.script.path",
        "yarn.nodemanager.disk-health-checker.min-healthy-disks",
        "yarn.nodemanager.linux-container-executor.path",
        "yarn.nodemanager.linux-container-executor.resources-handler.class",
        "yarn.nodemanager.linux-container-executor.cgroups.mount",
        "yarn.nodemanager.linux-container-executor.nonsecure-mode.user-pattern",
        "yarn.nodemanager.linux-container-executor.group",
        "yarn.nodemanager.log-aggregation.compression-type",
        "yarn.nodemanager.principal",
        "yarn.nodemanager.aux-services",
        "yarn.nodemanager.sleep-delay-before-sigkill.ms",
        "yarn.nodemanager.process-kill-wait.ms",
        "yarn.nodemanager.resourcemanager.connect.wait.secs",
        "yarn.nodemanager.resourcemanager.connect.retry_interval.secs",
        "yarn.nodemanager.resourcemanager.minimum.version",
        "yarn.client.nodemanager-client-async.thread-pool-max-size",
        "yarn.client.max-nodemanagers-proxies",
        "yarn.nodemanager.recovery.enabled",
        "yarn.nodemanager.recovery.supervised",
        "yarn.nodemanager.aux-services.mapreduce_shuffle.class",
        "mapreduce.job.jar",
        "yarn.web-proxy.principal",
        "yarn.web-proxy.address",
        "yarn.application.classpath",
        "yarn.timeline-service.enabled",
        "yarn.timeline-service.generic-application-history.enabled",
        "yarn.client.application-client-protocol.poll-interval-ms",
        "yarn.nodemanager.container-monitor.procfs-tree.smaps-based-rss.enabled",
        "yarn.nodemanager.resource.percentage-physical-cpu-limit",
        "yarn.nodemanager.resource.count-logical-processors-as-cores",
        "yarn.nodemanager.resource.pcores-vcores-multiplier",
        "yarn.nodemanager.resource.system-reserved-memory-mb",
        "yarn.nodemanager.resource.memory.enabled",
        "yarn.nodemanager.resource.cpu.enabled",
        "yarn.nodemanager.resource-plugins.gpu.docker-plugin",
        "yarn.nodemanager.runtime.linux.allowed-runtimes",
        "yarn.resourcemanager.hostname.rm1",
        "yarn.resourcemanager.webapp.address.rm1",
        "yarn.resourcemanager.address.rm1",
        "yarn.resourcemanager.scheduler.address.rm2",
        "yarn.resourcemanager.resource-tracker.address.rm1",
        "yarn.resourcemanager.admin.address.rm2",
        "yarn.log.server.url",
        "yarn.log.server.web-service.url",
        "yarn.nodemanager.log-aggregation.roll-monitoring-interval-seconds",
        "yarn.resourcemanager.system-metrics-publisher.enabled",
        "yarn.scheduler.increment-allocation-mb",
        "yarn.scheduler.increment-allocation-vcores",
        "yarn.resource-types.memory-mb.increment-allocation",
        "yarn.resource-types.vcores.increment-allocation",
        "yarn.nodemanager.container-localizer.java.opts",
        "yarn.nodemanager.log.deletion-threads-count",
        "yarn.nodemanager.node-labels.resync-interval-ms",
        "yarn.nodemanager.health-checker.run-before-startup",
        "yarn.nodemanager.elastic-memory-control.enabled",
        "yarn.nodemanager.numa-awareness.enabled",
        "yarn.resourcemanager.placement-constraints.handler",
        "yarn.resourcemanager.reservation-system.enable",
        "yarn.resourcemanager.leveldb-state-store.path",
        "yarn.resourcemanager.webapp.cross-origin.enabled",
        "yarn.nodemanager.webapp.cross-origin.enabled",
        "yarn.webapp.ui2.enable",
        "yarn.webapp.api-service.enable",
        "yarn.nodemanager.container-log-monitor.enable",
        "yarn.nodemanager.container-retry-minimum-interval-ms",
        "yarn.scheduler.configuration.store.class",
        "yarn.scheduler.configuration.mutation.acl-policy.class",
        "yarn.resourcemanager.application-tag-based-placement.enable",
        "yarn.resourcemanager.nodemanager-graceful-decommission-timeout-secs",
        "yarn.resourcemanager.decommissioning-nodes-watcher.poll-interval-secs",
        "yarn.nodemanager.pluggable-device-framework.enabled",
        "yarn.nodemanager.amrmproxy.enabled",
        "yarn.nodemanager.opportunistic-containers-max-queue-length",
        "yarn.resourcemanager.opportunistic-container-allocation.enabled",
        "yarn.nodemanager.distributed-scheduling.enabled",
        "yarn.federation.enabled",
        "yarn.router.bind-host",
        "yarn.sharedcache.enabled",
        "yarn.dispatcher.drain-events.timeout",
        "yarn.client.nodemanager-connect.max-wait-ms",
        "yarn.resourcemanager.am-rm-tokens.master-key-rolling-interval-secs",
        "yarn.resourcemanager.delegation.key.update-interval",
        "yarn.resourcemanager.proxy-user-privileges.enabled",
        "yarn.resourcemanager.metrics.runtime.buckets",
        "yarn.resourcemanager.epoch.range",
        "yarn.resourcemanager.work-preserving-recovery.enabled",
        "yarn.resourcemanager.activities-manager.cleanup-interval-ms",
        "yarn.resourcemanager.submission-preprocessor.enabled",
        "yarn.resourcemanager.auto-update.containers",
        "yarn.resourcemanager.resource-profiles.enabled",
        "yarn.resourcemanager.nm-container-queuing.max-queue-length",
        "yarn.resourcemanager.webapp.ui-actions.enabled",
        "yarn.nodemanager.collector-service.address",
        "yarn.timeline-service.version",
        "yarn.nodemanager.default-container-executor.log-dirs.permissions",
        "yarn.nodemanager.container-executor.exit-code-file.timeout-ms",
        "yarn.nodemanager.resource.detect-hardware-capabilities",
        "yarn.nodemanager.container-metrics.enable",
        "yarn.nodemanager.resource-plugins",
        "yarn.nodemanager.resource-plugins.gpu.allowed-gpu-devices",
        "yarn.nodemanager.resource-plugins.fpga.vendor-plugin.class",
        "yarn.resource-types",
        "yarn.resource-types.yarn.io/gpu.maximum-allocation",
        "yarn.node-labels.fs-store.root-dir",
        "yarn.node-labels.enabled",
        "yarn.node-attribute.fs-store.root-dir",
        "yarn.cluster.max-application-priority",
        "yarn.resourcemanager.node-labels.provider",
        "yarn.nodemanager.node-labels.provider",
        "yarn.nodemanager.node-attributes.provider.fetch-interval-ms",
        "yarn.scheduler.capacity.root.queues",
        "yarn.scheduler.capacity.maximum-applications",
        "yarn.scheduler.capacity.maximum-am-resource-percent",
        "yarn.scheduler.capacity.resource-calculator",
        "yarn.scheduler.capacity.root.default.capacity",
        "yarn.scheduler.capacity.root.default.user-limit-factor",
        "yarn.scheduler.capacity.root.default.maximum-capacity",
        "yarn.scheduler.capacity.root.default.state",
        "yarn.scheduler.capacity.root.default.acl_submit_applications",
        "yarn.scheduler.capacity.root.default.acl_administer_queue",
        "yarn.scheduler.capacity.root.default.acl_application_max_priority",
        "yarn.scheduler.capacity.root.default.maximum-application-lifetime",
        "yarn.scheduler.capacity.root.default.default-application-lifetime",
        "yarn.scheduler.capacity.node-locality-delay",
        "yarn.scheduler.capacity.rack-locality-additional-delay",
        "yarn.scheduler.capacity.queue-mappings",
        "yarn.scheduler.capacity.queue-mappings-override.enable",
        "yarn.scheduler.capacity.per-node-heartbeat.maximum-offswitch-assignments",
        "yarn.scheduler.capacity.application.fail-fast",
        "yarn.scheduler.capacity.workflow-priority-mappings",
        "yarn.scheduler.capacity.workflow-priority-mappings-override.enable",
        "yarn.scheduler.capacity.rack-locality-full-reset",
        "yarn.scheduler.capacity.schedule-asynchronously.enable",
        "yarn.scheduler.capacity.root.default.ordering-policy",
        "yarn.scheduler.capacity.root.default.ordering-policy.fair.enable-size-based-weight",
        "yarn.scheduler.capacity.root.default.minimum-user-limit-percent",
        "yarn.scheduler.capacity.root.default.maximum-allocation-mb",
        "yarn.scheduler.capacity.root.default.maximum-allocation",
        "yarn.scheduler.capacity.root.default.accessible-node-labels",
        "yarn.scheduler.capacity.root.default.accessible-node-labels.x.capacity",
        "yarn.scheduler.capacity.root.default.default-node-label-expression",
        "yarn.scheduler.capacity.root.default.priority",
        "yarn.scheduler.capacity.root.default.disable_preemption",
        "yarn.scheduler.capacity.root.default.intra-queue-preemption.disable_preemption",
        "yarn.scheduler.capacity.root.default.reservable",
        "yarn.scheduler.capacity.root.default.auto-create-child-queue.enabled",
        "yarn.scheduler.capacity.root.default.leaf-queue-template.capacity",
        "yarn.scheduler.capacity.root.default.auto-queue-creation-v2.enabled",
        "yarn.scheduler.capacity.root.default.user-settings.u1.weight",
        "yarn.scheduler.capacity.root.default.max-parallel-apps",
        "yarn.scheduler.capacity.root.default.maximum-applications",
        "yarn.scheduler.capacity.root.default.maximum-am-resource-percent",
        "yarn.scheduler.capacity.root.default.allow-zero-capacity-sum",
        "yarn.scheduler.capacity.user.max-parallel-apps",
        "yarn.scheduler.capacity.user.alice.max-parallel-apps",
        "yarn.scheduler.capacity.global-queue-max-application",
        "yarn.scheduler.capacity.minimum-user-limit-percent",
        "yarn.scheduler.capacity.user-limit-factor",
        "yarn.scheduler.queue-placement-rules.app-name",
        "yarn.scheduler.capacity.mapping-rule-format",
        "yarn.scheduler.capacity.mapping-rule-json-file",
        "yarn.scheduler.capacity.root.parent.*.auto-queue-creation-v2.template.maximum-capacity",
        "yarn.scheduler.capacity.root.parent.auto-queue-creation-v2.leaf-template.accessible-node-labels.GPU.capacity",
        "yarn.scheduler.capacity.root.parent1.auto-create-child-queue.management-policy",
        "yarn.scheduler.capacity.root.default.acl_administer_reservations",
        "yarn.scheduler.capacity.root.default.reservation-window",
        "yarn.scheduler.capacity.root.default.show-reservations-as-queues",
        "yarn.scheduler.capacity.per-node-heartbeat.multiple-assignments-enabled",
        "yarn.resourcemanager.reservation-system.planfollower.time-step",
        "yarn.resourcemanager.monitor.capacity.queue-management.monitoring-interval",
        "yarn.resourcemanager.queue.auto.refresh.monitoring-interval",
        "yarn.scheduler.configuration.leveldb-store.path",
        "yarn.resourcemanager.activities-manager.app-activities.ttl-ms",
        "yarn.scheduler.capacity.maximum-am-resource-percent",
        "yarn.resourcemanager.monitor.capacity.preemption.monitoring_interval",
        "yarn.resourcemanager.monitor.capacity.preemption.select_based_on_reserved_containers",
        "yarn.resourcemanager.monitor.capacity.preemption.intra-queue-preemption.max-allowable-limit",
        "hadoop.tmp.dir",
        "hadoop.security.authentication",
        "fs.defaultFS",
    ];
    let noisy: Vec<(&str, super::known::KeyStatus)> = REAL
        .iter()
        .map(|k| (*k, super::known::key_status(k)))
        .filter(|(_, s)| matches!(s, super::known::KeyStatus::Unknown { .. }))
        .collect();
    assert!(noisy.is_empty(), "{noisy:#?}");
}

/// A typed default and its text in `DEFAULTS` are one value: the integers' and booleans' text
/// is made from their constants at compile time; a fraction cannot be, so its text is held to
/// its constant here.
#[test]
fn each_default_text_is_its_typed_constant() {
    let text = |k: &str| keys::default_of(k).expect("a default");
    assert_eq!(text(keys::NM_LIVENESS_EXPIRY_MS), "600000");
    assert_eq!(text(keys::RM_NM_HEARTBEAT_INTERVAL_MS), "1000");
    assert_eq!(text(keys::CLUSTER_MAX_APPLICATION_PRIORITY), "0");
    assert_eq!(text(keys::RM_SCHEDULER_MONITOR_ENABLE), "false");
    assert_eq!(text(keys::NM_VMEM_CHECK_ENABLED), "true");
    assert_eq!(
        text(keys::CS_MAXIMUM_AM_RESOURCE_PERCENT).parse::<f64>(),
        Ok(keys::DEFAULT_CS_MAXIMUM_AM_RESOURCE_PERCENT)
    );
    assert_eq!(
        text(keys::NM_VMEM_PMEM_RATIO).parse::<f64>(),
        Ok(keys::DEFAULT_NM_VMEM_PMEM_RATIO)
    );
    for v in [0i128, 7, 10, 86_400, 1_200_000, -3] {
        let (d, n) = keys::decimal(v);
        assert_eq!(std::str::from_utf8(&d[..n]), Ok(v.to_string().as_str()));
    }
}
