/**
 * GET /docs: the OpenAPI document as a readable page, rendered here on the server as
 * plain HTML (no script, no CDN), so it works offline and under the console's strict
 * Content-Security-Policy.
 */

type Json = Record<string, unknown>;

interface Parameter { name: string; in: string; required: boolean; description?: string; schema: Json }
interface Operation { operationId: string; summary: string; tags: string[]; parameters?: Parameter[]; requestBody?: { content: Record<string, { schema: Json }> }; responses: Record<string, Json> }

const escape = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

export function docsPage(document: Json): string {
  const info = document.info as { title: string; version: string; description: string };
  const tags = document.tags as Array<{ name: string; description: string }>;
  const paths = document.paths as Record<string, Record<string, Operation>>;
  const operations = Object.entries(paths).flatMap(([path, methods]) => Object.entries(methods).map(([method, op]) => ({ path, method, op })));
  const sections = tags.map((tag) => {
    const ops = operations.filter(({ op }) => op.tags.includes(tag.name));
    return `<section id="tag-${escape(tag.name)}"><h2>${escape(tag.name)}</h2><p>${escape(tag.description)}</p>${ops.map(renderOperation).join('\n')}</section>`;
  });
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escape(info.title)} — API</title>
<link rel="stylesheet" href="/console/style.css">
</head>
<body class="docs">
<header><h1>${escape(info.title)} <small>API ${escape(info.version)}</small></h1>
<p>${escape(info.description)}</p>
<p>Machine-readable: <a href="/openapi.json">/openapi.json</a> (OpenAPI 3.1) · <a href="/">console</a></p>
<nav>${tags.map((t) => `<a href="#tag-${escape(t.name)}">${escape(t.name)}</a>`).join(' · ')}</nav></header>
<main>
${sections.join('\n')}
</main>
</body>
</html>
`;
}

function renderOperation({ path, method, op }: { path: string; method: string; op: Operation }): string {
  const params = op.parameters ?? [];
  const body = op.requestBody?.content['application/json']?.schema;
  return `<article class="operation" id="${escape(op.operationId)}">
<h3><span class="method method-${escape(method)}">${escape(method.toUpperCase())}</span> <code>${escape(path)}</code></h3>
<p>${escape(op.summary)} <span class="muted">(${escape(op.operationId)})</span></p>
${params.length > 0 ? `<table><thead><tr><th>parameter</th><th>in</th><th>required</th><th>schema</th></tr></thead><tbody>${params.map((p) =>
    `<tr><td><code>${escape(p.name)}</code></td><td>${escape(p.in)}</td><td>${p.required ? 'yes' : 'no'}</td><td><code>${escape(JSON.stringify(p.schema))}</code></td></tr>`).join('')}</tbody></table>` : ''}
${body ? `<details><summary>request body (application/json)</summary><pre>${escape(JSON.stringify(body, null, 2))}</pre></details>` : ''}
<p class="responses">responses: ${Object.keys(op.responses).map((status) => `<code>${escape(status)}</code>`).join(' ')} — errors in OpenAI's shape <code>{"error": {"message", "type", "param", "code"}}</code></p>
</article>`;
}
