//! Malformed and hostile templates must come back as errors, never as panics or hangs.

use infrasim_gotemplate::{render, Template};
use serde_json::json;

#[test]
fn odd_inputs_error_instead_of_panicking() {
    let data = json!({"a": {"b": [1, null, "x"]}, "s": "é✓", "n": null});
    let mut inputs: Vec<String> = [
        "{{",
        "}}",
        "{{}}",
        "{{ }}",
        "{{-}}",
        "{{- -}}",
        "{{ - }}",
        "{{/*",
        "{{/* */",
        "{{/* */ x}}",
        "{{ \"",
        "{{ `",
        "{{ '",
        "{{ 'ab' }}",
        "{{ '\\",
        "{{ \"\\",
        "{{ \"\\q\" }}",
        "{{ \"\\x4\" }}",
        "{{ \"\\u12\" }}",
        "{{ \"\\777\" }}",
        "{{ ( }}",
        "{{ ) }}",
        "{{ (( }}",
        "{{ .. }}",
        "{{ .a. }}",
        "{{ $ }}",
        "{{ $. }}",
        "{{ $$ }}",
        "{{ 1e }}",
        "{{ 0x }}",
        "{{ 1.2.3 }}",
        "{{ + }}",
        "{{ -- }}",
        "{{ 1i }}",
        "{{ 0b102 }}",
        "{{ :x }}",
        "{{ := }}",
        "{{ = }}",
        "{{ , }}",
        "{{ | }}",
        "{{ a | }}",
        "{{ . | }}",
        "{{ | . }}",
        "{{ if }}",
        "{{ if . }}",
        "{{ if . }}{{ else }}",
        "{{ else if . }}",
        "{{ range }}",
        "{{ range $i, }}",
        "{{ with }}{{ end }}",
        "{{ define }}",
        "{{ define \"x\" }}",
        "{{ template }}",
        "{{ template x }}",
        "{{ block \"b\" }}",
        "{{ end }}{{ end }}",
        "{{ continue }}",
        "{{ .s.x.y }}",
        "{{ .n.x }}",
        "{{ index .a.b 9 }}",
        "{{ index .a.b -1 }}",
        "{{ index .s 99 }}",
        "{{ slice .a.b 3 1 }}",
        "{{ substr 5 2 .s }}",
        "{{ substr 0 1 .s }}",
        "{{ trunc 1 .s }}",
        "{{ repeat 99999999999 \"x\" }}",
        "{{ until 99999999999 }}",
        "{{ printf \"%[\" 1 }}",
        "{{ printf \"%[9]d\" 1 }}",
        "{{ printf \"%.*d\" \"x\" 1 }}",
        "{{ printf \"%999999999d\" 1 }}",
        "{{ printf \"%\" }}",
        "{{ printf \"%-+# 0\" }}",
        "{{ regexFind \"[\" \"x\" }}",
        "{{ semver \"\" }}",
        "{{ semverCompare \"\" \"1.0.0\" }}",
        "{{ semverCompare \"||\" \"1.0.0\" }}",
        "{{ dig }}",
        "{{ dict 1 }}",
        "{{ call }}",
        "{{ and }}",
        "{{ or }}",
        "{{ eq }}",
        "{{ ne 1 }}",
        "{{ len }}",
        "{{ chunk 0 (list 1) }}",
        "{{ div 1 0 }}",
        "{{ mod 1 0 }}",
        "{{ fromJson \"[\" }}",
        "{{ define \"r\" }}{{ template \"r\" . }}{{ end }}{{ template \"r\" . }}",
        "\u{0}{{ \"\u{0}\" }}\u{ffff}",
        "{{ \"é\" | upper }}{{ `é",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    inputs.push(format!("{}1{}", "{{ (".repeat(300), ") }}".repeat(300)));
    inputs.push("{{ if . }}".repeat(300));
    inputs.push(format!("{}{}", "(".repeat(5000), ")"));
    for input in &inputs {
        // Either outcome is fine; the point is that it returns.
        let _ = render("tpl", input, &data);
        if let Ok(t) = Template::parse("tpl", input) {
            let _ = t.execute(&json!(null));
            let _ = t.execute(&json!([1, 2]));
        }
    }
    // Byte soup from the template alphabet.
    let alphabet: Vec<char> = "{}-/*. $()|:=,\"'`\\abcdefinrgtwhxe0123456789\n é"
        .chars()
        .collect();
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..3000 {
        let mut s = String::new();
        for _ in 0..(seed % 40) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            s.push(alphabet[(seed % alphabet.len() as u64) as usize]);
        }
        let _ = render("tpl", &format!("{{{{{s}}}}}"), &data);
        let _ = render("tpl", &s, &data);
    }
}

#[test]
fn template_is_shareable() {
    fn assert_traits<T: Clone + std::fmt::Debug + Send + Sync>() {}
    assert_traits::<Template>();
}
