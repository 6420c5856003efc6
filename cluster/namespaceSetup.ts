/**
 * What an operator does once on a new Temporal cluster before workers can use it: register the
 * namespace and add rollout-pipeline's search attributes (shared/searchAttributes.ts) to it,
 * through the frontend's own APIs. Idempotent. Resolves once the frontend serves the namespace
 * with every attribute (namespace caches refresh every 2 s).
 */
import { Connection } from '@temporalio/client';
import { msToTs } from '@temporalio/common';
import proto from '@temporalio/proto';
import { ROLLOUT_SEARCH_ATTRIBUTES } from '../shared/searchAttributes.js';
import { temporalSettings } from '../workers/temporalConnection.js';

const IndexedValueType = proto.temporal.api.enums.v1.IndexedValueType;
type IndexedValueType = proto.temporal.api.enums.v1.IndexedValueType;

const INDEXED_TYPE: Record<string, IndexedValueType> = {
  KEYWORD: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
  INT: IndexedValueType.INDEXED_VALUE_TYPE_INT,
  DOUBLE: IndexedValueType.INDEXED_VALUE_TYPE_DOUBLE,
  BOOL: IndexedValueType.INDEXED_VALUE_TYPE_BOOL,
  DATETIME: IndexedValueType.INDEXED_VALUE_TYPE_DATETIME,
  TEXT: IndexedValueType.INDEXED_VALUE_TYPE_TEXT,
  KEYWORD_LIST: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST,
};

export class NamespaceSetupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'NamespaceSetupError';
  }
}

function grpcCode(err: unknown): number | undefined {
  return typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'number' ? err.code : undefined;
}

const ALREADY_EXISTS = 6;

/** Registers `namespace` (retention `retentionDays`) and our search attributes on the cluster at `address`, connecting with `clientEnv`'s TEMPORAL_TLS_*. */
export async function setUpNamespace(address: string, namespace: string, retentionDays: number, clientEnv: Record<string, string> = {}, timeoutMs = 60_000): Promise<void> {
  const { tls } = temporalSettings(address, clientEnv);
  const deadline = Date.now() + timeoutMs;
  let lastError = 'not contacted yet';
  while (Date.now() < deadline) {
    let connection: Connection | undefined;
    try {
      connection = await Connection.connect({ address, connectTimeout: 2_000, ...(tls ? { tls } : {}) });
      await connection.workflowService
        .registerNamespace({ namespace, workflowExecutionRetentionPeriod: msToTs(`${retentionDays} days`) })
        .catch((err: unknown) => {
          if (grpcCode(err) !== ALREADY_EXISTS) throw err;
        });
      const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace });
      const missing = ROLLOUT_SEARCH_ATTRIBUTES.filter((key) => !(key.name in (customAttributes ?? {})));
      if (missing.length > 0) {
        const searchAttributes: Record<string, IndexedValueType> = {};
        for (const key of missing) {
          const type = INDEXED_TYPE[key.type];
          if (type === undefined) throw new NamespaceSetupError(`search attribute ${key.name} has type ${key.type}, which this set-up cannot register`);
          searchAttributes[key.name] = type;
        }
        await connection.operatorService.addSearchAttributes({ namespace, searchAttributes });
        lastError = `search attributes just added: ${missing.map((k) => k.name).join(', ')}`;
      } else {
        // Served: the namespace is in the frontend's cache and visibility answers.
        await connection.workflowService.listWorkflowExecutions({ namespace, pageSize: 1 });
        return;
      }
    } catch (err) {
      if (err instanceof NamespaceSetupError) throw err;
      lastError = err instanceof Error ? err.message : String(err);
    } finally {
      await connection?.close();
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new NamespaceSetupError(`namespace ${namespace} on the Temporal cluster at ${address} was not ready in ${timeoutMs / 1000} s: ${lastError}`);
}
