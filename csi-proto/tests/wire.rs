//! Proves that `proto/csi/v1/csi.proto` describes exactly the wire format of the upstream CSI
//! spec v1.13.0: both files are compiled by `protoc` into descriptor sets and every message
//! (nested ones and map entries included), enum, service, extension and custom option of package
//! `csi.v1` is compared. All differences are reported in one assertion message.
//!
//! The upstream file is read from the Go module cache that tests/env/install-tools.sh fills
//! (csi-sanity depends on the spec module). A missing file is a failure, never a skip.

use prost::Message;
use prost_types::{
    DescriptorProto, EnumDescriptorProto, FieldDescriptorProto, FileDescriptorProto,
    FileDescriptorSet, ServiceDescriptorProto,
};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::process::Command;

const SPEC_VERSION: &str = "v1.13.0";
const PACKAGE: &str = "csi.v1";

/// Same resolution as tests/env/common.sh: GOMODCACHE_OVERRIDE, else $GK_CACHE/go/mod.
fn spec_proto() -> PathBuf {
    let modcache = match std::env::var_os("GOMODCACHE_OVERRIDE") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(
            std::env::var_os("GK_CACHE").unwrap_or_else(|| "/var/cache/glusterkube".into()),
        )
        .join("go/mod"),
    };
    modcache
        .join(format!(
            "github.com/container-storage-interface/spec@{SPEC_VERSION}"
        ))
        .join("csi.proto")
}

fn our_proto_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("proto")
}

/// Runs protoc on `file` (relative to `root`) and returns the encoded descriptor set.
fn compile(label: &str, root: &Path, file: &str) -> Vec<u8> {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("csi-{label}.pb"));
    let protoc = std::env::var_os("PROTOC").unwrap_or_else(|| "protoc".into());
    let mut cmd = Command::new(&protoc);
    cmd.arg("-I").arg(root);
    if let Some(inc) = std::env::var_os("PROTOC_INCLUDE") {
        cmd.arg("-I").arg(inc);
    } else if Path::new("/usr/include/google/protobuf/descriptor.proto").exists() {
        cmd.arg("-I/usr/include");
    }
    cmd.arg("--include_imports")
        .arg(format!("--descriptor_set_out={}", out.display()))
        .arg(root.join(file));
    let result = cmd.output().unwrap_or_else(|e| {
        panic!(
            "cannot run {protoc:?} ({e}); install protobuf-compiler and libprotobuf-dev with \
             tests/env/install-tools.sh"
        )
    });
    assert!(
        result.status.success(),
        "protoc failed on {label} ({}):\n{}",
        root.join(file).display(),
        String::from_utf8_lossy(&result.stderr)
    );
    std::fs::read(&out).expect("read descriptor set")
}

fn both_sets() -> (Vec<u8>, Vec<u8>) {
    let spec = spec_proto();
    assert!(
        spec.is_file(),
        "the upstream CSI spec {SPEC_VERSION} is missing at {}; run tests/env/install-tools.sh \
         (it builds csi-sanity, which downloads the spec module into the Go module cache)",
        spec.display()
    );
    let ours = compile("ours", &our_proto_root(), "csi/v1/csi.proto");
    let theirs = compile(
        "spec",
        spec.parent().unwrap(),
        spec.file_name().unwrap().to_str().unwrap(),
    );
    (ours, theirs)
}

// ---------------------------------------------------------------------------------------------
// Structural comparison with prost_types
// ---------------------------------------------------------------------------------------------

fn csi_file(set: &FileDescriptorSet, label: &str) -> FileDescriptorProto {
    let mut files = set.file.iter().filter(|f| f.package() == PACKAGE);
    let file = files
        .next()
        .unwrap_or_else(|| panic!("{label}: no file with package {PACKAGE}"))
        .clone();
    assert!(files.next().is_none(), "{label}: several {PACKAGE} files");
    file
}

#[derive(Default)]
struct Index<'a> {
    messages: BTreeMap<String, &'a DescriptorProto>,
    enums: BTreeMap<String, &'a EnumDescriptorProto>,
    services: BTreeMap<String, &'a ServiceDescriptorProto>,
    /// Extensions declared at file level or inside messages, by full name.
    extensions: BTreeMap<String, &'a FieldDescriptorProto>,
}

impl<'a> Index<'a> {
    fn of(file: &'a FileDescriptorProto) -> Self {
        let mut ix = Index::default();
        let scope = format!(".{}", file.package());
        for m in &file.message_type {
            ix.add_message(&scope, m);
        }
        for e in &file.enum_type {
            ix.enums.insert(format!("{scope}.{}", e.name()), e);
        }
        for s in &file.service {
            ix.services.insert(format!("{scope}.{}", s.name()), s);
        }
        for x in &file.extension {
            ix.extensions.insert(format!("{scope}.{}", x.name()), x);
        }
        ix
    }

    fn add_message(&mut self, scope: &str, m: &'a DescriptorProto) {
        let name = format!("{scope}.{}", m.name());
        for nested in &m.nested_type {
            self.add_message(&name, nested);
        }
        for e in &m.enum_type {
            self.enums.insert(format!("{name}.{}", e.name()), e);
        }
        for x in &m.extension {
            self.extensions.insert(format!("{name}.{}", x.name()), x);
        }
        self.messages.insert(name, m);
    }
}

struct Diffs(Vec<String>);

impl Diffs {
    fn eq<T: PartialEq + Debug>(&mut self, what: &str, ours: T, spec: T) {
        if ours != spec {
            self.0.push(format!("{what}: ours {ours:?}, spec {spec:?}"));
        }
    }

    /// Compares two keyed maps: reports keys present on one side only, and calls `each` for
    /// keys on both.
    fn keyed<K: Ord + Debug, V>(
        &mut self,
        what: &str,
        ours: &BTreeMap<K, V>,
        spec: &BTreeMap<K, V>,
        mut each: impl FnMut(&mut Self, &K, &V, &V),
    ) {
        for (k, o) in ours {
            match spec.get(k) {
                Some(s) => each(self, k, o, s),
                None => self.0.push(format!("{what} {k:?}: only in ours")),
            }
        }
        for k in spec.keys().filter(|k| !ours.contains_key(k)) {
            self.0.push(format!("{what} {k:?}: only in spec"));
        }
    }
}

/// An options message with nothing set counts as absent: the spec writes `rpc X(..) returns (..)
/// {}`, which makes protoc record an empty MethodOptions, where `;` records none. Custom options
/// (dropped by prost_types) are compared separately, see [`custom_options`].
fn opts<T: Default + PartialEq + Clone>(o: &Option<T>) -> Option<T> {
    o.clone().filter(|o| *o != T::default())
}

/// The parts of a field that reach the wire or the JSON mapping, with the oneof by name.
fn field_shape(m: &DescriptorProto, f: &FieldDescriptorProto) -> impl PartialEq + Debug {
    let oneof = f
        .oneof_index
        .map(|i| m.oneof_decl[i as usize].name().to_string());
    (
        f.name().to_string(),
        f.r#type(),
        f.type_name().to_string(),
        f.label(),
        oneof,
        f.json_name().to_string(),
        f.proto3_optional,
        f.default_value.clone(),
        opts(&f.options),
    )
}

fn compare_messages(d: &mut Diffs, ours: &Index, spec: &Index) {
    d.keyed("message", &ours.messages, &spec.messages, |d, name, o, s| {
        let fields = |m: &DescriptorProto| -> BTreeMap<i32, FieldDescriptorProto> {
            m.field.iter().map(|f| (f.number(), f.clone())).collect()
        };
        d.keyed(
            &format!("{name} field number"),
            &fields(o),
            &fields(s),
            |d, num, of, sf| {
                d.eq(
                    &format!("{name} field {num} (name, type, type_name, label, oneof, json_name, proto3_optional, default, options)"),
                    field_shape(o, of),
                    field_shape(s, sf),
                );
            },
        );
        let oneofs = |m: &DescriptorProto| -> BTreeSet<String> {
            m.oneof_decl.iter().map(|x| x.name().to_string()).collect()
        };
        d.eq(&format!("{name} oneofs"), oneofs(o), oneofs(s));
        let reserved = |m: &DescriptorProto| -> (BTreeSet<(i32, i32)>, BTreeSet<String>) {
            (
                m.reserved_range.iter().map(|r| (r.start(), r.end())).collect(),
                m.reserved_name.iter().cloned().collect(),
            )
        };
        d.eq(&format!("{name} reserved"), reserved(o), reserved(s));
        d.eq(&format!("{name} options"), opts(&o.options), opts(&s.options));
    });
}

fn compare_enums(d: &mut Diffs, ours: &Index, spec: &Index) {
    d.keyed("enum", &ours.enums, &spec.enums, |d, name, o, s| {
        let values = |e: &EnumDescriptorProto| -> BTreeMap<String, (i32, _)> {
            e.value
                .iter()
                .map(|v| (v.name().to_string(), (v.number(), opts(&v.options))))
                .collect()
        };
        d.keyed(
            &format!("{name} value"),
            &values(o),
            &values(s),
            |d, v, ov, sv| d.eq(&format!("{name}.{v} (number, options)"), ov, sv),
        );
        let reserved = |e: &EnumDescriptorProto| -> (BTreeSet<(i32, i32)>, BTreeSet<String>) {
            (
                e.reserved_range
                    .iter()
                    .map(|r| (r.start(), r.end()))
                    .collect(),
                e.reserved_name.iter().cloned().collect(),
            )
        };
        d.eq(&format!("{name} reserved"), reserved(o), reserved(s));
        d.eq(
            &format!("{name} options"),
            opts(&o.options),
            opts(&s.options),
        );
    });
}

fn compare_services(d: &mut Diffs, ours: &Index, spec: &Index) {
    d.keyed("service", &ours.services, &spec.services, |d, name, o, s| {
        let methods = |svc: &ServiceDescriptorProto| -> BTreeMap<String, _> {
            svc.method
                .iter()
                .map(|m| {
                    let shape = (
                        m.input_type().to_string(),
                        m.output_type().to_string(),
                        m.client_streaming(),
                        m.server_streaming(),
                        opts(&m.options),
                    );
                    (m.name().to_string(), shape)
                })
                .collect()
        };
        d.keyed(
            &format!("{name} method"),
            &methods(o),
            &methods(s),
            |d, m, om, sm| {
                d.eq(
                    &format!("{name}.{m} (input, output, client_streaming, server_streaming, options)"),
                    om,
                    sm,
                )
            },
        );
        d.eq(&format!("{name} options"), opts(&o.options), opts(&s.options));
    });
}

fn compare_extensions(d: &mut Diffs, ours: &Index, spec: &Index) {
    d.keyed(
        "extension",
        &ours.extensions,
        &spec.extensions,
        |d, name, o, s| {
            let shape = |x: &FieldDescriptorProto| {
                (
                    x.number(),
                    x.extendee().to_string(),
                    x.r#type(),
                    x.label(),
                    x.type_name().to_string(),
                    x.json_name().to_string(),
                )
            };
            d.eq(
                &format!("{name} (number, extendee, type, label, type_name, json_name)"),
                shape(o),
                shape(s),
            );
        },
    );
}

// ---------------------------------------------------------------------------------------------
// Custom options. prost_types drops extension fields of the *Options messages, so the same
// bytes are decoded a second time through a minimal mirror of descriptor.proto whose option
// messages keep only fields 1059 (csi_secret) and 1060 (the alpha_* flags).
// ---------------------------------------------------------------------------------------------

mod raw {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct CsiOptions {
        #[prost(bool, optional, tag = "1059")]
        pub csi_secret: Option<bool>,
        #[prost(bool, optional, tag = "1060")]
        pub alpha: Option<bool>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Set {
        #[prost(message, repeated, tag = "1")]
        pub file: Vec<File>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct File {
        #[prost(string, tag = "2")]
        pub package: String,
        #[prost(message, repeated, tag = "4")]
        pub message_type: Vec<Msg>,
        #[prost(message, repeated, tag = "5")]
        pub enum_type: Vec<Enum>,
        #[prost(message, repeated, tag = "6")]
        pub service: Vec<Service>,
        #[prost(message, repeated, tag = "7")]
        pub extension: Vec<Field>,
        #[prost(message, optional, tag = "8")]
        pub options: Option<CsiOptions>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Msg {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(message, repeated, tag = "2")]
        pub field: Vec<Field>,
        #[prost(message, repeated, tag = "3")]
        pub nested_type: Vec<Msg>,
        #[prost(message, repeated, tag = "4")]
        pub enum_type: Vec<Enum>,
        #[prost(message, repeated, tag = "6")]
        pub extension: Vec<Field>,
        #[prost(message, optional, tag = "7")]
        pub options: Option<CsiOptions>,
        #[prost(message, repeated, tag = "8")]
        pub oneof_decl: Vec<Named>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Field {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(message, optional, tag = "8")]
        pub options: Option<CsiOptions>,
    }

    /// OneofDescriptorProto: options are field 2.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Named {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(message, optional, tag = "2")]
        pub options: Option<CsiOptions>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Enum {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(message, repeated, tag = "2")]
        pub value: Vec<Named3>,
        #[prost(message, optional, tag = "3")]
        pub options: Option<CsiOptions>,
    }

    /// EnumValueDescriptorProto: options are field 3.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Named3 {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(message, optional, tag = "3")]
        pub options: Option<CsiOptions>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Service {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(message, repeated, tag = "2")]
        pub method: Vec<Method>,
        #[prost(message, optional, tag = "3")]
        pub options: Option<CsiOptions>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Method {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(message, optional, tag = "4")]
        pub options: Option<CsiOptions>,
    }
}

/// Every element of package csi.v1 that carries csi_secret or an alpha_* flag, keyed by kind
/// and full name.
fn custom_options(bytes: &[u8]) -> BTreeMap<String, raw::CsiOptions> {
    fn put(out: &mut BTreeMap<String, raw::CsiOptions>, key: String, o: &Option<raw::CsiOptions>) {
        if let Some(o) = o {
            if o.csi_secret.is_some() || o.alpha.is_some() {
                out.insert(key, o.clone());
            }
        }
    }
    fn put_enum(out: &mut BTreeMap<String, raw::CsiOptions>, scope: &str, e: &raw::Enum) {
        let name = format!("{scope}.{}", e.name);
        put(out, format!("enum {name}"), &e.options);
        for v in &e.value {
            put(out, format!("enum value {name}.{}", v.name), &v.options);
        }
    }
    fn put_msg(out: &mut BTreeMap<String, raw::CsiOptions>, scope: &str, m: &raw::Msg) {
        let name = format!("{scope}.{}", m.name);
        put(out, format!("message {name}"), &m.options);
        for f in &m.field {
            put(out, format!("field {name}.{}", f.name), &f.options);
        }
        for f in &m.extension {
            put(out, format!("extension {name}.{}", f.name), &f.options);
        }
        for o in &m.oneof_decl {
            put(out, format!("oneof {name}.{}", o.name), &o.options);
        }
        for e in &m.enum_type {
            put_enum(out, &name, e);
        }
        for n in &m.nested_type {
            put_msg(out, &name, n);
        }
    }

    let set = raw::Set::decode(bytes).expect("decode descriptor set (raw)");
    let file = set
        .file
        .iter()
        .find(|f| f.package == PACKAGE)
        .expect("csi.v1 file");
    let mut out = BTreeMap::new();
    let scope = format!(".{PACKAGE}");
    put(&mut out, "file".into(), &file.options);
    for m in &file.message_type {
        put_msg(&mut out, &scope, m);
    }
    for e in &file.enum_type {
        put_enum(&mut out, &scope, e);
    }
    for x in &file.extension {
        put(
            &mut out,
            format!("extension {scope}.{}", x.name),
            &x.options,
        );
    }
    for s in &file.service {
        let name = format!("{scope}.{}", s.name);
        put(&mut out, format!("service {name}"), &s.options);
        for m in &s.method {
            put(&mut out, format!("method {name}.{}", m.name), &m.options);
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------

#[test]
fn descriptors_match_the_upstream_spec() {
    let (ours_bytes, spec_bytes) = both_sets();
    let ours_set = FileDescriptorSet::decode(ours_bytes.as_slice()).expect("decode ours");
    let spec_set = FileDescriptorSet::decode(spec_bytes.as_slice()).expect("decode spec");
    let ours_file = csi_file(&ours_set, "ours");
    let spec_file = csi_file(&spec_set, "spec");
    let ours = Index::of(&ours_file);
    let spec = Index::of(&spec_file);

    // Guard against a vacuous pass (e.g. an empty or wrongly selected file).
    assert!(
        spec.messages.len() > 100 && spec.services.len() == 5 && spec.extensions.len() == 7,
        "unexpected upstream shape: {} messages, {} services, {} extensions",
        spec.messages.len(),
        spec.services.len(),
        spec.extensions.len()
    );

    let mut d = Diffs(Vec::new());
    d.eq("syntax", ours_file.syntax(), spec_file.syntax());
    let deps = |f: &FileDescriptorProto| f.dependency.iter().cloned().collect::<BTreeSet<_>>();
    d.eq("imports", deps(&ours_file), deps(&spec_file));
    d.eq(
        "file options",
        opts(&ours_file.options),
        opts(&spec_file.options),
    );
    compare_messages(&mut d, &ours, &spec);
    compare_enums(&mut d, &ours, &spec);
    compare_services(&mut d, &ours, &spec);
    compare_extensions(&mut d, &ours, &spec);

    let ours_opts = custom_options(&ours_bytes);
    let spec_opts = custom_options(&spec_bytes);
    assert!(
        spec_opts
            .values()
            .filter(|o| o.csi_secret == Some(true))
            .count()
            > 20,
        "custom options were not decoded from the upstream descriptor"
    );
    d.keyed("custom option on", &ours_opts, &spec_opts, |d, k, o, s| {
        d.eq(&format!("custom options of {k}"), o, s)
    });

    assert!(
        d.0.is_empty(),
        "proto/csi/v1/csi.proto differs from the CSI spec {SPEC_VERSION} ({}) in {} place(s):\n  {}",
        spec_proto().display(),
        d.0.len(),
        d.0.join("\n  ")
    );
    eprintln!(
        "csi.v1 matches spec {SPEC_VERSION}: {} messages, {} enums, {} services, {} extensions, \
         {} custom option annotations",
        ours.messages.len(),
        ours.enums.len(),
        ours.services.len(),
        ours.extensions.len(),
        ours_opts.len()
    );
}
