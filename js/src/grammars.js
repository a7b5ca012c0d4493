// Code highlighting for answers and tool cards: highlight.js (core) with its Python, SQL, shell,
// YAML and JSON grammars, a module of its own (static/grammars.js) fetched from the kernel the first
// time a page shows a code block in one of these languages, so widget.js stays small. Until it
// arrives such a block shows plain, marked `nba-hl-pending` (see markdown.js).
import hljs from "highlight.js/lib/core";
import python from "highlight.js/lib/languages/python";
import sql from "highlight.js/lib/languages/sql";
import bash from "highlight.js/lib/languages/bash";
import yaml from "highlight.js/lib/languages/yaml";
import json from "highlight.js/lib/languages/json";

hljs.registerLanguage("python", python);
hljs.registerLanguage("sql", sql);
hljs.registerLanguage("bash", bash);
hljs.registerLanguage("yaml", yaml);
hljs.registerLanguage("json", json);
hljs.registerAliases(["py"], { languageName: "python" });
hljs.registerAliases(["sh", "shell", "console", "zsh"], { languageName: "bash" });
hljs.registerAliases(["yml"], { languageName: "yaml" });

/** Whether `name` (a language or an alias, lower case) has a grammar here. @param {string} name */
export const has = (name) => !!hljs.getLanguage(name);

/** `code` as escaped text in highlight.js spans; throws for a language without a grammar here.
 * @param {string} code @param {string} name */
export const highlight = (code, name) => hljs.highlight(code, { language: name, ignoreIllegals: true }).value;
