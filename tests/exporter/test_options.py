"""ExportOptions holds exactly export()'s settings, with its defaults."""

import inspect

import attrs

import exporter
from exporter._options import IR_LEVELS, ExportOptions


def test_the_record_has_every_setting_of_export_with_its_default():
    keywords = {
        name: parameter.default
        for name, parameter in inspect.signature(exporter.export).parameters.items()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY
    }
    fields = {name: field.default for name, field in attrs.fields_dict(ExportOptions).items()}
    assert fields == keywords


def test_the_default_ir_is_one_exporter_produces():
    assert ExportOptions().ir in IR_LEVELS
