// highlight.js grammars for code blocks in answers (SQL, shell, YAML, JSON): a module of its own
// (static/grammars.js), fetched from the kernel the first time a page shows such a block, so
// widget.js stays small. Python's grammar stays in widget.js (the run_python card shows it at once).
// Each export is a grammar function that the widget registers into its own highlight.js instance.
export { default as sql } from "highlight.js/lib/languages/sql";
export { default as bash } from "highlight.js/lib/languages/bash";
export { default as yaml } from "highlight.js/lib/languages/yaml";
export { default as json } from "highlight.js/lib/languages/json";
