// The Node script of docs/RECIPES.md, run as it stands against a real server, importing
// 'ringcast' as an installed package would be (a node_modules link to clients/node).

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { REPO, Server } from './server.js';

const server = new Server();
before(() => server.start());
after(() => server.stop());

function recipe(name) {
  const text = readFileSync(path.join(REPO, 'docs/RECIPES.md'), 'utf8');
  const match = new RegExp(`<!-- recipe: ${name.replace('.', '\\.')} -->\\n\`\`\`[a-z]*\\n([\\s\\S]*?)\\n\`\`\``).exec(text);
  assert.ok(match, `docs/RECIPES.md has no recipe ${name}`);
  return `${match[1]}\n`;
}

test('the Node script reports its upload as one task that ends done', () => {
  const folder = mkdtempSync(path.join(tmpdir(), 'ringcast-recipe-'));
  mkdirSync(path.join(folder, 'node_modules'));
  symlinkSync(path.join(REPO, 'clients/node'), path.join(folder, 'node_modules/ringcast'), 'dir');
  writeFileSync(path.join(folder, 'upload.mjs'), recipe('upload.mjs'));
  const result = spawnSync(process.execPath, ['upload.mjs'], { cwd: folder, env: { ...process.env, RINGCAST_URL: server.url }, encoding: 'utf8', timeout: 60000 });
  assert.equal(result.status, 0, result.stderr);
  return server.task('sync.upload').then((task) => {
    assert.deepEqual([task.state, task.completed, task.total, task.title], ['done', 20, 20, 'Upload']);
  });
});
