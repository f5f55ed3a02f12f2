"""Import contracts that import-linter has no type for (registered in pyproject.toml's
`contract_types`; `lint-imports` runs from the repository root, which puts this folder in reach).

`core_only`: a module in a `core` folder imports, of the app, only other `core` modules. With the
forbidden-packages contract beside it, a pure module stays pure, and one taken out of `core/` while a
core module still uses it breaks the contract instead of quietly leaving the check.
"""

from __future__ import annotations

from grimp import ImportGraph
from importlinter import Contract, ContractCheck, fields, output
from importlinter.domain import helpers


class CoreOnlyContract(Contract):
    type_name = "core_only"

    source_modules = fields.ListField(subfield=fields.ModuleExpressionField())
    root = fields.StringField()

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        exprs = self.source_modules  # type: ignore[attr-defined]
        cores = {m.name for m in helpers.module_expressions_to_modules(graph, exprs, as_packages=True)}
        root = str(self.root)  # type: ignore[attr-defined]
        invalid = sorted(
            (importer, imported)
            for importer in cores
            for imported in graph.find_modules_directly_imported_by(importer)
            if imported.split(".")[0] == root and imported not in cores
        )
        return ContractCheck(kept=not invalid, metadata={"invalid": invalid})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for importer, imported in check.metadata["invalid"]:
            output.print_error(f"{importer} is not allowed to import {imported} (not in a core folder)")
            output.new_line()
