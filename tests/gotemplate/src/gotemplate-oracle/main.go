// gotemplate-oracle renders templates with Go's text/template and sprig's hermetic
// function map exactly as Cluster API does for ClusterClass patches, so that the Rust
// crate infrasim-gotemplate can be compared with the real thing.
//
// Input (stdin): a JSON array of {"template": string, "data": object}.
// Output (stdout): a JSON array of {"output": string} or {"error": string}, in order.
package main

import (
	"bytes"
	"encoding/json"
	"os"
	"text/template"

	"github.com/Masterminds/sprig/v3"
)

type testCase struct {
	Template string          `json:"template"`
	Data     json.RawMessage `json:"data"`
}

type result struct {
	Output *string `json:"output,omitempty"`
	Error  *string `json:"error,omitempty"`
}

func render(c testCase) (out string, err error) {
	// A panic inside text/template or a function is a failure of the case, not the run.
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{r}
		}
	}()
	// Cluster API decodes the variables into map[string]interface{} with encoding/json.
	var data map[string]interface{}
	if len(c.Data) > 0 {
		if err := json.Unmarshal(c.Data, &data); err != nil {
			return "", err
		}
	}
	tpl, err := template.New("tpl").Funcs(sprig.HermeticTxtFuncMap()).Parse(c.Template)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if err := tpl.Execute(&buf, data); err != nil {
		return "", err
	}
	return buf.String(), nil
}

type panicError struct{ v interface{} }

func (p *panicError) Error() string { return "panic" }

func main() {
	var cases []testCase
	if err := json.NewDecoder(os.Stdin).Decode(&cases); err != nil {
		os.Stderr.WriteString("bad input: " + err.Error() + "\n")
		os.Exit(2)
	}
	results := make([]result, len(cases))
	for i, c := range cases {
		out, err := render(c)
		if err != nil {
			msg := err.Error()
			results[i].Error = &msg
		} else {
			results[i].Output = &out
		}
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(results); err != nil {
		os.Exit(3)
	}
}
