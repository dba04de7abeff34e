//! Differential test against real Go: builds tests/gotemplate's oracle (Go's text/template
//! with sprig's HermeticTxtFuncMap, as Cluster API uses them), renders a corpus with both,
//! and requires identical output, or an error from both.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{json, Value};

const KUBE_VIP: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: kube-vip
  namespace: kube-system
spec:
  containers:
  - args:
    - manager
    env:
    - name: vip_arp
      value: "true"
    - name: port
      value: "6443"
    - name: address
      value: "{{ .controlPlaneIpAddr }}"
    - name: cp_enable
      value: "true"
    image: ghcr.io/kube-vip/kube-vip:v0.6.4
    name: kube-vip
  hostNetwork: true
"#;

fn data() -> Value {
    json!({
        "sshKey": "ssh-rsa AAAA",
        "emptyKey": "",
        "controlPlaneIpAddr": "10.0.0.10",
        "controlPlanePort": 6443,
        "kubeVipPodManifest": KUBE_VIP,
        "big": 1000000,
        "mid": 123456,
        "half": 0.5,
        "tiny": 0.00001,
        "neg": -2.5,
        "zero": 0,
        "t": true,
        "f": false,
        "null": null,
        "str": "Hello, World",
        "list": ["a", "b", "c"],
        "nums": [3, 1, 2],
        "mixed": [1, "x", null, true, 2.5, {"k": "v"}],
        "empty": [],
        "emptyMap": {},
        "map": {"key": "value", "b": 2, "a": 1, "nested": {"x": "y"}},
        "builtin": {
            "cluster": {"name": "c1", "namespace": "ns", "topology": {"version": "v1.28.3", "class": "quick-start"}},
            "controlPlane": {"version": "v1.28.3+k3s1", "replicas": 3},
            "machineDeployment": {"version": "v1.27.1+build.2", "class": "md-0", "replicas": 2}
        },
        "users": [{"name": "alice", "admin": true}, {"name": "bob", "admin": false}],
        "csv": "a,b,,c",
        "ver": "v1.24.0-rc.1",
        "html": "<a href=\"x\">&'</a>",
        "unicode": "héllo wörld ✓",
        "multiline": "line1\nline2\n",
        "numstr": "42",
        "floatstr": "3.75",
    })
}

/// Each case: a template, and optionally its own data (else the shared data).
fn corpus() -> Vec<(String, Option<Value>)> {
    let t = |s: &str| (s.to_string(), None);
    let mut c: Vec<(String, Option<Value>)> = vec![
        // Cluster API's own templates.
        t("{{ if .sshKey }}true{{end}}"),
        t("{{ if .emptyKey }}true{{end}}"),
        t("host: '{{ .controlPlaneIpAddr }}'\nport: {{ .controlPlanePort }}"),
        t(r#"content: {{ printf "%q" (regexReplaceAll "(name: address\n +value:).*" .kubeVipPodManifest (printf "$1 %s" .controlPlaneIpAddr)) }}"#),
        t(r#"{{ regexReplaceAll "(name: address\n +value:).*" .kubeVipPodManifest (printf "$1 %s" .controlPlaneIpAddr) }}"#),
        t(r#"kindest/node:{{ .builtin.machineDeployment.version | replace "+" "_" }}"#),
        t(r#"{{ if semverCompare ">= v1.24.0-0" .builtin.controlPlane.version }}new{{ else }}old{{ end }}"#),
        t(r#"{{ semverCompare "< v1.24.0-0" .builtin.controlPlane.version }}"#),
        t("{{- range $i, $e := .list }}{{ $i }}={{ $e }}{{ end -}}"),
        t("{{ .builtin.cluster.name }}"),
        t(r#"{{ index .map "key" }}"#),
        t("{{ toYaml . }}"),
        // Printing.
        t("{{ .big }} {{ .mid }} {{ .half }} {{ .tiny }} {{ .neg }} {{ .zero }}"),
        t("{{ .map }}"),
        t("{{ .list }} {{ .mixed }} {{ .empty }} {{ .emptyMap }}"),
        t("{{ .null }}|{{ .missing }}|{{ .missing.deeper }}|{{ .map.nope }}"),
        t("{{ .null.x }}"),
        t("{{ .str.x }}"),
        t("{{ .t }} {{ .f }}"),
        t("{{ 3 }} {{ 3.0 }} {{ 1e3 }} {{ 0x1F }} {{ 'a' }} {{ -7 }} {{ 1_000 }}"),
        t("{{ \"a\\tb\\u00e9\\x41\" }}{{ `raw\\n` }}"),
        t("{{ nil }}"),
        t("{{ . | len }}"),
        // Trimming and comments.
        t("a  {{- 1 -}}  b"),
        t("a\n  {{- /* comment */ -}}\n  b"),
        t("{{/* c */}}x{{- /* d */}}  y"),
        t("a {{-1}} b"),
        t("x{{ 1 -}}\n\n  y"),
        // Variables.
        t("{{ $x := 1 }}{{ $x }}{{ $x = 2 }}{{ $x }}"),
        t("{{ $.str }}{{ with .map }}{{ $.str }}{{ .key }}{{ end }}"),
        t("{{ $m := .map }}{{ $m.nested.x }}"),
        t("{{ $n := .null }}{{ $n.x }}"),
        t("{{ if true }}{{ $x := 1 }}{{ $x }}{{ end }}"),
        t("{{ $x := 0 }}{{ range .list }}{{ $x = . }}{{ end }}{{ $x }}"),
        t("{{ $y }}"),
        t("{{ (.map).key }} {{ (index .users 0).name }}"),
        // Control flow.
        t("{{ if .f }}a{{ else if .zero }}b{{ else if .list }}c{{ else }}d{{ end }}"),
        t("{{ with .missing }}x{{ else }}none{{ end }}"),
        t("{{ with .builtin.cluster }}{{ .name }}/{{ .namespace }}{{ end }}"),
        t("{{ range .map }}{{ . }},{{ end }}"),
        t("{{ range $k, $v := .map }}{{ $k }}={{ $v }};{{ end }}"),
        t("{{ range .empty }}x{{ else }}empty{{ end }}"),
        t("{{ range .missing }}x{{ else }}nothing{{ end }}"),
        t("{{ range .nums }}{{ if eq . 1.0 }}{{ continue }}{{ end }}{{ . }}{{ end }}"),
        t("{{ range .list }}{{ if eq . \"b\" }}{{ break }}{{ end }}{{ . }}{{ end }}"),
        t("{{ range $i, $u := .users }}{{ if $u.admin }}{{ $u.name }}{{ end }}{{ end }}"),
        t("{{ range .str }}{{ . }}{{ end }}"),
        t("{{ range .mixed }}[{{ . }}]{{ end }}"),
        t("{{ range .mixed }}{{ .k }}{{ end }}"),
        t("{{ if and .t .sshKey }}yes{{ end }} {{ and .t 0 1 }} {{ or .zero .emptyKey .str }} {{ or 0 \"\" }} {{ and }}"),
        t("{{ not .t }} {{ not .missing }} {{ not .empty }}"),
        t("{{ and .f .missing.x }} {{ or .t (fail \"no\") }}"),
        t("{{ define \"x\" }}[{{ . }}]{{ end }}{{ template \"x\" .str }}{{ template \"x\" }}"),
        t("{{ block \"b\" .list }}{{ range . }}{{ . }}{{ end }}{{ end }}"),
        t("{{ template \"nope\" }}"),
        t("{{ define \"r\" }}{{ if . }}{{ len . }}{{ template \"r\" (rest .) }}{{ end }}{{ end }}{{ template \"r\" .list }}"),
        // Comparisons.
        t("{{ eq .str \"Hello, World\" }} {{ eq .controlPlanePort 6443.0 }} {{ eq 1 2 3 1 }}"),
        t("{{ eq .controlPlanePort 6443 }}"),
        t("{{ ne .str \"x\" }} {{ lt 1 2 }} {{ le 2 2 }} {{ gt \"b\" \"a\" }} {{ ge 1.5 2.5 }}"),
        t("{{ lt .list 1 }}"),
        t("{{ eq .missing \"x\" }} {{ eq .null .missing }}"),
        t("{{ eq .list .list }}"),
        t("{{ lt 1 \"a\" }}"),
        // Builtins.
        t("{{ len .str }} {{ len .list }} {{ len .map }} {{ len .unicode }}"),
        t("{{ len 3 }}"),
        t("{{ index .list 1 }} {{ index .map \"nested\" \"x\" }} {{ index .users 1 \"name\" }}"),
        t("{{ index .list 5 }}"),
        t("{{ index .map \"missing\" }}|{{ index .map \"missing\" | printf \"%v\" }}"),
        t("{{ index .list 1.0 }}"),
        t("{{ print 1 2 \"a\" \"b\" 3 }} {{ println \"x\" 1 }}"),
        t("{{ html .html }} {{ js .html }} {{ urlquery \"a b&c=d/é\" }}"),
        t("{{ html .missing }}"),
        t("{{ call .str }}"),
        t("{{ .str | printf \"%s!\" }} {{ \"x\" | printf \"%s-%s\" \"y\" }}"),
        // printf.
        t("{{ printf \"%d %5d %-5d| %05d %+d %x %X %o %b %c %q %U\" 42 42 42 42 42 255 255 8 5 65 65 65 }}"),
        t("{{ printf \"%d\" .controlPlanePort }} {{ printf \"%v\" .controlPlanePort }} {{ printf \"%.0f\" .controlPlanePort }}"),
        t("{{ printf \"%f %.2f %8.3f %e %E %g %G %.3g\" 3.14159 3.14159 3.14159 1234.5678 1234.5678 0.000012345 1e21 3.14159 }}"),
        t("{{ printf \"%s %10s|%-10s|%.2s %q %x %X\" \"go\" \"go\" \"go\" \"gopher\" \"a\\\"b\" \"hi\" \"hi\" }}"),
        t("{{ printf \"%t %v\" true false }} {{ printf \"%s\" true }}"),
        t("{{ printf \"%v %s %d\" .list .list .nums }}"),
        t("{{ printf \"%v|%+v|%T|%T|%T\" .map .map .map .list .half }}"),
        t("{{ printf \"%s %s\" \"one\" }} {{ printf \"%s\" \"a\" \"b\" 3 }} {{ printf \"%!\" }} {{ printf \"100%%\" }}"),
        t("{{ printf \"%v %d\" nil nil }}"),
        t("{{ printf \"%v\" .missing }} {{ printf \"%s\" .null }}"),
        t("{{ printf \"%08.3f|%-8.2f|%+.1e|% d\" 3.14159 2.5 12345.678 7 }}"),
        t("{{ printf \"%[2]s %[1]s\" \"a\" \"b\" }}"),
        t("{{ printf \"%*d|%-*d\" 5 1 4 2 }}"),
        t("{{ printf \"%q\" .unicode }} {{ printf \"%+q\" .unicode }} {{ printf \"%#q\" \"raw\" }}"),
        t("{{ printf \"%6.2v|%g|%g|%g\" 3.14159 100000.0 1e-4 123456789.0 }}"),
        t("{{ printf \"%x %X % x %#x\" \"hello\" \"hi\" \"ab\" 255 }}"),
        t("{{ printf \"%5t|%-7v|%3c\" true .f 66 }}"),
        t("{{ printf \"%d %s\" 3.5 4 }}"),
        t("{{ printf 3 }}"),
        t("{{ base \"/a/b.tar.gz\" }} {{ dir \"/a/b/c\" }} {{ dir \"x\" }} {{ clean \"a//b/../c/./d/\" }} {{ clean \"/../x\" }} {{ ext \"a/b.tar.gz\" }} {{ ext \"a.b/c\" }} {{ isAbs \"/x\" }} {{ osBase \"\" }} {{ clean \"../../a\" }}"),
        // More core behaviour.
        t("{{ with $x := .str }}{{ $x }}{{ end }} {{ if $y := .list }}{{ $y }}{{ end }}"),
        t("{{ list }} {{ printf \"%v\" (list) }} {{ .map.nested }} {{ index . \"builtin\" \"cluster\" \"name\" }}"),
        t("{{ len .missing }}"),
        t("{{ $ }}"),
        t("{{ printf \"%5.1f|%-12.3e|%+g\" .half .big .neg }}"),
        t("{{ printf \"%s\" .map }} {{ printf \"%d\" .map }} {{ printf \"%q\" .list }}"),
        t("{{ .str | printf \"%s %s\" \"a\" }} {{ \"a\" | eq \"a\" }} {{ 3 | printf \"%d\" }}"),
        t("{{ default .missing .missing }}"),
        t("{{ if\n .t }}yes{{\n end }}"),
        t("{{ template \"later\" . }}{{ define \"later\" }}L{{ .str }}{{ end }}"),
        t("{{ range $k, $v := .builtin }}{{ $k }}:{{ len $v }} {{ end }}"),
        t("{{ range $i, $e := .list }}{{ if $i }},{{ end }}{{ $e }}{{ end }}"),
        t("{{ with .list }}{{ index . 0 }}{{ end }}"),
        t("   \n  "),
        t(""),
        t("{{ toJson \"\u{2028}<x>\" }} {{ toRawJson \"\u{2028}<x>\" }}"),
        t("{{ quote \"tab\\there\" \"\u{7}\" \"é\" }}"),
        t("{{ .str | len | printf \"%05d\" }} {{ printf \"%x\" -255 }} {{ printf \"%#o %#b\" 8 5 }}"),
        t("{{ range .nums }}{{ printf \"%.2f \" . }}{{ end }}"),
        t("{{ $l := list 1 2 }}{{ $l = append $l 3 }}{{ $l }}"),
    ];
    c.extend(sprig_corpus());
    // Cases with their own data.
    c.push((
        "{{ .a }}{{ .b.c }}".into(),
        Some(json!({"a": 1.5e300, "b": {"c": -0.0}})),
    ));
    c.push((
        "{{ . }}".into(),
        Some(json!({"z": 1, "a": [null], "m": {"k": {}}})),
    ));
    c.push((
        "{{ range . }}{{ . }} {{ end }}".into(),
        Some(json!({"b": 2, "a": 1, "c": 3})),
    ));
    c.push((
        "{{ .x }} {{ printf \"%v %g %e\" .x .x .x }}".into(),
        Some(json!({"x": 1e21})),
    ));
    c.push((
        "{{ .x }} {{ .y }} {{ .z }}".into(),
        Some(json!({"x": 123456789012.0, "y": 0.1, "z": 1e-7})),
    ));
    c.push(("{{ .x }}".into(), Some(json!({"x": 100}))));
    let floats = json!({"x": 1e-7, "y": 1e21, "z": 0.1, "w": [], "v": {}, "n": [1.5, {"a": null}]});
    c.push(("{{ toJson . }}".into(), Some(floats.clone())));
    c.push(("{{ toPrettyJson . }}".into(), Some(floats.clone())));
    c.push(("{{ . }}".into(), Some(floats)));
    c
}

/// The sprig functions and error cases.
fn sprig_corpus() -> Vec<(String, Option<Value>)> {
    let t = |s: &str| (s.to_string(), None);
    vec![
        // sprig: strings.
        t("{{ trim \"  x y  \" }}|{{ trimAll \"$\" \"$$5.00$\" }}|{{ trimPrefix \"He\" .str }}|{{ trimSuffix \"ld\" .str }}"),
        t("{{ upper .str }} {{ lower .str }} {{ title \"hello wide-world foo_bar\" }} {{ untitle \"Hello World\" }}"),
        t("{{ repeat 3 \"ab\" }} {{ substr 1 4 \"abcdef\" }} {{ substr -1 3 \"abcdef\" }} {{ substr 2 -1 \"abcdef\" }} {{ substr 2 99 \"abcdef\" }}"),
        t("{{ nospace \" a b\\tc \" }} {{ trunc 5 .str }} {{ trunc -5 .str }} {{ trunc 50 .str }}"),
        t("{{ abbrev 5 .str }} {{ abbrev 50 .str }} {{ abbrev 3 .str }}"),
        t("{{ contains \"World\" .str }} {{ hasPrefix \"Hell\" .str }} {{ hasSuffix \"x\" .str }}"),
        t("{{ quote .str 1 .null .half }} {{ squote .str .controlPlanePort }} {{ cat \"a\" 1 .null \"b\" .list }}"),
        t("{{ indent 2 .multiline }}|{{ nindent 4 \"a\\nb\" }}"),
        t("{{ replace \"l\" \"L\" .str }} {{ plural \"one\" \"many\" 1 }} {{ plural \"one\" \"many\" 2 }}"),
        t("{{ plural \"one\" \"many\" .controlPlanePort }}"),
        t("{{ split \",\" .csv }} {{ (split \",\" .csv)._1 }} {{ splitList \",\" .csv }} {{ splitn \",\" 2 .csv }}"),
        t("{{ join \"-\" .list }} {{ join \",\" .mixed }} {{ join \"+\" \"single\" }} {{ join \",\" .nums }}"),
        t("{{ sortAlpha (list \"b\" \"C\" \"a\") }} {{ toStrings .mixed }} {{ sortAlpha .nums }}"),
        t("{{ toString .controlPlanePort }} {{ toString .null }} {{ toString .list }} {{ toString .t }}"),
        t("{{ b64enc .str }} {{ b64dec \"SGVsbG8=\" }} {{ b32enc \"hi\" }} {{ b32dec \"NBUQ====\" }} {{ b64dec \"!!\" }}"),
        t("{{ sha1sum .str }} {{ sha256sum .str }} {{ adler32sum .str }}"),
        t("{{ upper .controlPlanePort }}"),
        t("{{ upper .missing }}"),
        t("{{ repeat .controlPlanePort \"x\" }}"),
        t("{{ .str | upper | replace \"O\" \"0\" | trunc 8 | quote }}"),
        // sprig: defaults and flow.
        t("{{ default \"d\" .missing }} {{ default \"d\" .emptyKey }} {{ default \"d\" .str }} {{ default 5 .zero }} {{ .missing | default \"piped\" }}"),
        t("{{ empty .missing }} {{ empty .zero }} {{ empty .list }} {{ empty .emptyMap }} {{ empty .t }}"),
        t("{{ coalesce .missing .emptyKey .zero .str }} {{ coalesce .missing }}"),
        t("{{ ternary \"y\" \"n\" .t }} {{ ternary \"y\" \"n\" (eq 1 2) }}"),
        t("{{ ternary \"y\" \"n\" .sshKey }}"),
        t("{{ all 1 \"a\" .t }} {{ all 1 .zero }} {{ any .zero .emptyKey }} {{ any .zero .str }}"),
        t("{{ fail \"boom\" }}"),
        t("{{ toJson .map }} {{ toJson .mixed }} {{ toJson .html }} {{ toRawJson .html }} {{ toJson .big }} {{ toJson .tiny }}"),
        t("{{ toPrettyJson .builtin.cluster }}"),
        t("{{ (fromJson \"{\\\"a\\\": [1, 2.5]}\").a }} {{ fromJson \"bad\" }}"),
        t("{{ typeOf .half }} {{ typeOf .list }} {{ typeOf .map }} {{ typeOf .str }} {{ typeOf 1 }} {{ typeOf .null }} {{ typeOf (splitList \",\" .csv) }} {{ typeOf (add 1 2) }}"),
        t("{{ kindOf .half }} {{ kindOf .list }} {{ kindOf .map }} {{ kindIs \"string\" .str }} {{ typeIs \"float64\" .zero }} {{ kindOf .null }}"),
        t("{{ deepEqual .list (list \"a\" \"b\" \"c\") }} {{ deepEqual .map .map }} {{ deepEqual 1 1.0 }}"),
        // sprig: lists.
        t("{{ list 1 \"a\" .half }} {{ append .list \"d\" }} {{ prepend .list \"z\" }} {{ first .list }} {{ last .list }}"),
        t("{{ rest .list }} {{ initial .list }} {{ reverse .list }} {{ first .empty }} {{ rest .empty }}"),
        t("{{ uniq (list 1 1 \"a\" \"a\" 2) }} {{ without .list \"b\" }} {{ has \"b\" .list }} {{ has \"z\" .list }} {{ has 1 .null }}"),
        t("{{ compact (list 0 1 \"\" \"x\" nil false) }} {{ concat .list .nums }} {{ slice .list 1 }} {{ slice .list 1 2 }} {{ slice .list }}"),
        t("{{ first .str }}"),
        t("{{ slice .list 2 9 }}"),
        t("{{ chunk 2 .list }} {{ until 4 }} {{ until -3 }} {{ untilStep 0 10 3 }} {{ seq 5 }} {{ seq 2 -2 }} {{ seq 0 2 8 }}"),
        t("{{ range $i := until 3 }}{{ $i }}{{ end }}"),
        // sprig: dicts.
        t("{{ $d := dict \"a\" 1 \"b\" \"two\" }}{{ $d }} {{ $d.b }} {{ get $d \"a\" }} {{ get $d \"zz\" }} {{ hasKey $d \"a\" }}"),
        t("{{ $d := dict }}{{ $_ := set $d \"k\" \"v\" }}{{ $d.k }} {{ unset $d \"k\" }} {{ len $d }}"),
        t("{{ $_ := set .map \"added\" 1 }}{{ .map.added }}"),
        t("{{ pluck \"name\" (index .users 0) (index .users 1) }} {{ keys (dict \"only\" 1) }} {{ sortAlpha (keys .map) }}"),
        t("{{ pick .map \"a\" \"b\" \"zz\" }} {{ omit .map \"nested\" \"key\" }} {{ values (dict \"x\" 1) }}"),
        t("{{ dig \"builtin\" \"cluster\" \"name\" \"dflt\" . }} {{ dig \"builtin\" \"nope\" \"dflt\" . }}"),
        t("{{ dict \"odd\" }} {{ dict 1 2 }}"),
        t("{{ get .list \"x\" }}"),
        // sprig: math.
        t("{{ add 1 2 3 }} {{ add1 .controlPlanePort }} {{ sub 10 .half }} {{ mul 2 3 4 }} {{ div 7 2 }} {{ mod 7 3 }} {{ add .neg 1 }}"),
        t("{{ max 1 5 3 }} {{ min 4 .neg }} {{ floor 2.7 }} {{ ceil 2.1 }} {{ round 2.456 2 }} {{ round 2.5 0 }} {{ maxf 1 2.5 }} {{ minf 1 2.5 }}"),
        t("{{ int .floatstr }} {{ int \"3.0\" }} {{ int64 .numstr }} {{ float64 .numstr }} {{ atoi \"12x\" }} {{ atoi \"-5\" }} {{ int .half }} {{ int .neg }}"),
        t("{{ div 1 0 }}"),
        t("{{ add \"0x10\" \"010\" true }} {{ toDecimal \"777\" }}"),
        t("{{ if gt (len .list) 2 }}many{{ end }}"),
        t("{{ range until (int .builtin.controlPlane.replicas) }}{{ . }}{{ end }}"),
        // sprig: regex.
        t("{{ regexMatch \"^[a-z]+\\\\d$\" \"abc1\" }} {{ regexMatch \"^\\\\d+$\" \"١٢\" }} {{ regexMatch \"(\" \"x\" }}"),
        t("{{ regexFind \"[0-9]+\" \"ab123cd45\" }} {{ regexFindAll \"[0-9]+\" \"ab123cd45e6\" -1 }} {{ regexFindAll \"[0-9]+\" \"ab123cd45e6\" 2 }}"),
        t("{{ regexReplaceAll \"a(x*)b\" \"-ab-axxb-\" \"${1}W\" }} {{ regexReplaceAll \"a(x*)b\" \"-ab-axxb-\" \"$1W\" }} {{ regexReplaceAllLiteral \"a(x*)b\" \"-ab-axxb-\" \"$1\" }}"),
        t("{{ regexSplit \"z+\" \"pizza\" -1 }} {{ regexSplit \"z+\" \"pizza\" 1 }} {{ regexSplit \"\" \"abc\" -1 }} {{ regexQuoteMeta \"1.5+[x]\" }}"),
        t("{{ regexFind \"(\" \"x\" }}"),
        t("{{ regexReplaceAll \"\\\\s+\" \"a  b\\tc\" \"_\" }} {{ regexReplaceAll \"(?m)^\" \"a\\nb\" \"> \" }}"),
        // sprig: semver.
        t("{{ (semver \"v1.2.3-rc.1+b5\").Major }} {{ (semver \"1.2.3-rc.1+b5\").Prerelease }} {{ semver \"1.2\" }} {{ (semver \"v1.2.3\").Original }}"),
        t("{{ semver \"x.y\" }}"),
        t("{{ semverCompare \"~1.2.3\" \"1.2.9\" }} {{ semverCompare \"~1.2.3\" \"1.3.0\" }} {{ semverCompare \"^1.2\" \"1.9.9\" }} {{ semverCompare \"^0.2.3\" \"0.3.0\" }}"),
        t("{{ semverCompare \"1.2 - 1.4.5\" \"1.4.5\" }} {{ semverCompare \">1.2, <2\" \"1.5.0\" }} {{ semverCompare \"<1 || >=3\" \"2.0.0\" }} {{ semverCompare \"1.x\" \"1.9.0\" }} {{ semverCompare \"*\" \"5.0.0\" }}"),
        t("{{ semverCompare \">= v1.24.0\" .ver }} {{ semverCompare \">= v1.24.0-0\" .ver }} {{ semverCompare \"!=1.2.3\" \"1.2.4\" }} {{ semverCompare \"=1.2.3\" \"v1.2.3\" }}"),
        t("{{ semverCompare \">=1.2.x\" \"1.2.0\" }} {{ semverCompare \"<=1.2\" \"1.2.9\" }} {{ semverCompare \">1.2\" \"1.2.9\" }} {{ semverCompare \"~1\" \"1.9.0\" }}"),
        t("{{ semverCompare \"garbage\" \"1.0.0\" }}"),
        t("{{ semverCompare \">1\" \"notaversion\" }}"),
        // Errors.
        t("{{ foo }}"),
        t("{{ if .t }}unclosed"),
        t("{{ end }}"),
        t("{{ .a | 3 }}"),
        t("{{ \"unterminated }}"),
        t("{{ (1 }}"),
        t("{{ 1) }}"),
        t("{{ break }}"),
        t("{{ .str 1 }}"),
        t("{{ $x := }}"),
        t("{{ 99999999999999999999 }}"),
        t("{{ printf }}"),
        t("{{ index }}"),
        t("{{ .list.x }}"),
        t("{{ .t.x }}"),
        t("{{ 1.x }}"),
        t("{{ else }}"),
        t("{{ range $a, $b, $c := .list }}{{ end }}"),
        t("{{ nil }}x"),
        t("{{ upper 3 }}"),
        t("{{ .str | len | printf \"%d\" }}"),
        t("{{ define \"a\" }}x{{ end }}{{ define \"a\" }}y{{ end }}{{ template \"a\" }}"),
    ]
}

fn go_available() -> bool {
    Command::new("go")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Builds the oracle in a scratch GOPATH. Debian ships sprig and semver under their
/// pre-module paths; GOPATH mode reaches them as `.../v3` through symlinks made here.
fn build_oracle(dir: &Path) -> PathBuf {
    let root =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/gotemplate/src/gotemplate-oracle");
    let src = dir.join("src");
    let prog = src.join("gotemplate-oracle");
    std::fs::create_dir_all(&prog).expect("scratch GOPATH");
    std::fs::copy(root.join("main.go"), prog.join("main.go")).expect("copy oracle source");
    for lib in ["sprig", "semver"] {
        let parent = src.join("github.com/Masterminds").join(lib);
        std::fs::create_dir_all(&parent).expect("scratch GOPATH");
        let target = Path::new("/usr/share/gocode/src/github.com/Masterminds").join(lib);
        assert!(
            target.is_dir(),
            "{} is missing: scripts/test-all installs golang-go and golang-github-masterminds-sprig-dev",
            target.display()
        );
        std::os::unix::fs::symlink(&target, parent.join("v3")).expect("symlink");
    }
    let out = dir.join("gotemplate-oracle");
    let gopath = format!("{}:/usr/share/gocode", dir.display());
    let status = Command::new("go")
        .args(["build", "-o"])
        .arg(&out)
        .arg("gotemplate-oracle")
        .current_dir(dir)
        .env("GO111MODULE", "off")
        .env("GOFLAGS", "")
        .env("GOPATH", gopath)
        .env("GOCACHE", dir.join("gocache"))
        .status()
        .expect("run go build");
    assert!(status.success(), "go build of the oracle failed");
    out
}

#[test]
fn renders_like_go() {
    assert!(
        go_available(),
        "the Go oracle needs `go`: scripts/test-all installs golang-go and golang-github-masterminds-sprig-dev"
    );
    let dir = std::env::temp_dir().join(format!("gotemplate-oracle-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let oracle = build_oracle(&dir);
    let shared = data();
    let cases = corpus();
    let input: Vec<Value> = cases
        .iter()
        .map(|(t, d)| json!({"template": t, "data": d.clone().unwrap_or_else(|| shared.clone())}))
        .collect();
    let mut child = Command::new(&oracle)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run oracle");
    serde_json::to_writer(child.stdin.take().expect("stdin"), &input).expect("write cases");
    let out = child.wait_with_output().expect("oracle output");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "oracle failed");
    let go: Vec<Value> = serde_json::from_slice(&out.stdout).expect("oracle JSON");
    assert_eq!(go.len(), cases.len());
    let mut failures = Vec::new();
    for ((tpl, d), g) in cases.iter().zip(&go) {
        let ours = infrasim_gotemplate::render("tpl", tpl, d.as_ref().unwrap_or(&shared));
        let same = match (&ours, g.get("output").and_then(Value::as_str)) {
            (Ok(o), Some(w)) => o == w,
            (Err(_), None) => true,
            _ => false,
        };
        if !same {
            failures.push(format!("template: {tpl:?}\n  go:   {g}\n  ours: {ours:?}"));
        }
    }
    println!("{} oracle cases", cases.len());
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
