// Runs the tab's index.js in Node on a small stand-in for the browser's DOM, on one `runs` answer.
//
// usage: node frontend.mjs INDEX_JS ANSWER_JSON
// Prints one JSON line: the text of every top-level section of the page, with its class.
// Only what index.js calls is stood in for: elements with children, text, class and
// attributes; SVG elements; fetch() answering ANSWER_JSON; no parent frame.

import {readFileSync} from 'node:fs';
import {pathToFileURL} from 'node:url';

const [indexJs, answerPath] = process.argv.slice(2);

class Node {
  constructor(tag) {
    this.tagName = tag;
    this.children = [];
    this.attributes = {};
    this.className = '';
    this.text = '';
  }
  appendChild(node) { this.children.push(node); return node; }
  replaceChildren(...nodes) { this.children = nodes; this.text = ''; }
  setAttribute(name, value) { this.attributes[name] = String(value); }
  get classList() { return {contains: (c) => this.className.split(' ').includes(c)}; }
  set textContent(value) { this.children = []; this.text = String(value); }
  get textContent() { return this.text + this.children.map((c) => c.textContent).join(''); }
}

globalThis.Node = Node;
globalThis.document = {
  head: new Node('head'),
  body: new Node('body'),
  visibilityState: 'visible',
  createElement: (tag) => new Node(tag),
  createElementNS: (_ns, tag) => new Node(tag),
};
globalThis.window = globalThis;
globalThis.window.parent = globalThis.window;
globalThis.setInterval = () => 0;
globalThis.fetch = async () => ({ok: true, status: 200, json: async () => JSON.parse(readFileSync(answerPath, 'utf8'))});

const {render} = await import(pathToFileURL(indexJs).href);
await render();
const main = document.body.children[0];
const page = main.children[0];
const sections = page && page.children ? page.children.map((s) => ({cls: s.className, text: s.textContent})) : [];
console.log(JSON.stringify({top: main.children.map((c) => c.className), sections}));
